"""Adapters that drop evidex into the RAG frameworks people already run.

``evidex.integrations.langchain`` (a LangChain document compressor),
``evidex.integrations.llamaindex`` (a LlamaIndex node postprocessor) and
``evidex.integrations.haystack`` (Haystack components), each behind its own extra
(``pip install 'evidex[langchain]'``, ``[llamaindex]``, ``[haystack]``): importing one without
its framework raises :class:`~evidex.errors.MissingExtraError` with that command. Each keeps the
framework's own documents (text, metadata, ids) and adds evidex's grades under
``metadata["evidex"]``. ``evidex.integrations.metrics`` holds the audit and tier jobs as metric
objects in the shape RAGAS and DeepEval users know (a score and its reasons); it needs no extra.

What the modules here may import: the public names of ``evidex`` (the job calls and their
result types, ``evidex.jobs.select``) and, each adapter alone, its own framework. Nothing in
evidex imports this package, so no framework is ever loaded unless its adapter is.
"""
