"""A fault of Lorekeeper's own while it relays a reply, injected for a test."""

from __future__ import annotations

from apps.generation.services.bounds import Arrived


def fail_relaying_after(monkeypatch, pieces: int) -> None:
    """Relaying fails (a RuntimeError) at the piece after the first `pieces` of the model's reply
    (`monkeypatch.undo()` puts it right)."""
    taken = Arrived.add

    def add(self, delta):
        if len(self.parts) >= pieces:
            raise RuntimeError("injected fault")
        return taken(self, delta)

    monkeypatch.setattr(Arrived, "add", add)
