"""Judges that read their prompts through another judge's window."""

from __future__ import annotations

from evidex.judging import Judge, Payload

__all__ = ["BorrowedWindow"]


class BorrowedWindow(Judge):
    """A judge built around another one (a cascade's expensive stage, an encoder wrapped as a
    scorer) counts tokens and sizes passages as that judge does: preflight then cuts a passage
    to what the judge that reads it can hold, not to a default guess."""

    @property
    def window_judge(self) -> Judge:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return self.window_judge.count_tokens(text)

    def passage_token_limit(self, overhead_tokens: int, batch_size: int) -> int:
        return self.window_judge.passage_token_limit(overhead_tokens, batch_size)

    def query_token_limit(self) -> int | None:
        return self.window_judge.query_token_limit()

    def answers_in_pieces(self, payload: type[Payload]) -> bool:
        return self.window_judge.answers_in_pieces(payload)
