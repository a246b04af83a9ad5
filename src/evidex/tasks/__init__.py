"""The tasks of the four jobs, one subpackage or module each: :mod:`.tier`, :mod:`.rerank`,
:mod:`.classify` and :mod:`.audit`.

A task is pure: it builds the judge request from typed input, validates the reply against that
input, builds the re-ask and says what the explicit fallback is. :mod:`.base` holds what every
task gives the harness (the step protocol, prompt templates, reply helpers) and :mod:`.spans`
finds verbatim spans with their offsets. Reading files into task types is
:mod:`evidex.loaders`; running a task is :mod:`evidex.harness` and :mod:`evidex.jobs`.

Tasks may import only :mod:`evidex.types`, :mod:`evidex.errors`, :mod:`evidex.judging`,
:mod:`evidex._text`, :mod:`evidex.taxonomy`, each other, pydantic and the standard library:
no I/O, no harness, no jobs, no judge backend. Other packages import from the public modules
(``evidex.tasks.audit``, ``evidex.tasks.spans`` ...), never from a private one; from a
subpackage (:mod:`.audit`, :mod:`.rerank`) they import the names it exports, not from its
modules.
"""
