"""The token: a ``fencing.fence``, ``(epoch, counter)``, as text ``"epoch:counter"``."""
from __future__ import annotations

from typing import NamedTuple, Union

MAX_PART = 9223372036854775807


class Token(NamedTuple):
    """A fencing token.  Ordered as the server orders fences: epoch first,
    then counter.  ``str(token)`` is the text the server reads (``"3:42"``)."""

    epoch: int
    counter: int

    def __str__(self) -> str:
        return f"{self.epoch}:{self.counter}"

    @classmethod
    def parse(cls, text: Union[str, "Token"]) -> "Token":
        """``"E:C"``, or a bare ``"C"`` (epoch 0), as the server's input
        function reads it; a Token is returned as it is."""
        if isinstance(text, Token):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a token is text 'epoch:counter', not {type(text).__name__}")
        s = text.strip()
        e, sep, c = s.partition(":")
        if not sep:
            e, c = "0", e
        if not (e.isascii() and e.isdigit() and c.isascii() and c.isdigit()):
            raise ValueError(f"invalid token {text!r}: expected 'epoch:counter'")
        epoch, counter = int(e), int(c)
        if epoch > MAX_PART or counter > MAX_PART:
            raise ValueError(f"token {text!r} out of range")
        return cls(epoch, counter)

    @classmethod
    def from_server(cls, text: str) -> "Token":
        """A ``fencing.fence`` as the server prints it: ``"E:C"``, or the
        composite form ``"(E,C)"`` of the managed edition; few checks, for
        the hot path."""
        if text[:1] == "(":
            e, _, c = text[1:-1].partition(",")
        else:
            e, _, c = text.partition(":")
        return cls(int(e), int(c))

    @classmethod
    def from_zxid(cls, zxid: int, generation: int = 0) -> "Token":
        """A ZooKeeper zxid under a generation, as the server's
        ``fencing.fence_from_zxid(zxid, generation)`` computes it:
        ``((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff)``, so
        that tokens compare exactly as zxids do and a raised generation
        beats every zxid of the generations before it."""
        if not 0 <= zxid <= MAX_PART:
            raise ValueError(f"zxid {zxid} is out of range for a fence token")
        if not 0 <= generation <= 2147483647:
            raise ValueError(f"generation {generation} is out of range (0 to 2147483647)")
        return cls((generation << 32) | (zxid >> 32), zxid & 0xFFFFFFFF)


TokenLike = Union[Token, str]


def as_text(token: TokenLike) -> str:
    """The token as the text bound to ``fencing.set_token()``."""
    if token is None:
        raise TypeError("no token: fenced writes need one (the server would say SF002)")
    return str(Token.parse(token))
