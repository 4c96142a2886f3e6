"""The token: a fencing.fence, (epoch, counter), as text "epoch:counter"."""
from __future__ import annotations

from typing import NamedTuple, Union

MAX_PART = 9223372036854775807


class Token(NamedTuple):
    """A fencing token.  Ordered as the server orders fences: epoch first,
    then counter.  ``str(token)`` is the text the server reads ("3:42")."""

    epoch: int
    counter: int

    def __str__(self) -> str:
        return f"{self.epoch}:{self.counter}"

    @classmethod
    def parse(cls, text: Union[str, "Token"]) -> "Token":
        """"E:C" or a bare "C" (epoch 0), as the server's input function."""
        if isinstance(text, Token):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a token is text 'epoch:counter', not {type(text).__name__}")
        s = text.strip()
        e, sep, c = s.partition(":")
        if not sep:
            e, c = "0", e
        if not (e.isdigit() and c.isdigit()):
            raise ValueError(f"invalid token {text!r}: expected 'epoch:counter'")
        epoch, counter = int(e), int(c)
        if epoch > MAX_PART or counter > MAX_PART:
            raise ValueError(f"token {text!r} out of range")
        return cls(epoch, counter)


TokenLike = Union[Token, str]


def as_text(token: TokenLike) -> str:
    """The token as the text bound to fencing.set_token()."""
    if token is None:
        raise TypeError("no token: fenced writes need one (the server would say SF002)")
    return str(Token.parse(token))
