"""Applying an instance's queued changes (entity-core's sync_push, with the vector clocks it leaves unused:
docs/GLOSSARY.md).

Each change carries the clock of the version the instance made. Against the stored clock:
- it descends from the stored one (or is a create): applied;
- it is the stored one: applied already (a retry), nothing changes;
- the stored one descends from it: rejected as stale, and the answer carries the stored version to adopt;
- neither descends from the other (concurrent): a conflict, resolved by the object's rule —
  characters and settings (identity documents): last write wins, by the change's time to the second, then the
  instance's priority, then its key; memories: last write wins the same way, except daily memories, whose bullets
  merge, and weekly, monthly, yearly and significant ones, where the push is authoritative.
  Either way the result's clock descends from both, so every instance takes the result at its next pull.
- `edit` is a person's correction (entity-core's memory/update): it overwrites whatever is stored, records who
  edited, and counts a version.
- `delete` is final: the object is removed (a memory is retired, kept in its history) and a tombstone goes on the
  feed; a later change to it from an instance that had not seen the deletion is rejected, and it never comes back
  under that uid. A deletion wins over edits made concurrently with it.
A memory whose content changes gets a new vector (embedded later, as any new content).

Uids are unique across all users (and a memory's across kinds). A create under a uid this user's syncable objects
do not hold, but something else does (another user's object or tombstone, or one of the user's message memories),
is refused whole with one 409 `uid_unavailable` that says nothing of what holds it: the client makes a new uid.

The package, by seam: `changes` (what a push carries and answers, and its limits), `state` (one push's working
state: what it read, what it will write, the conflict rules it applies), `memories` and `identity` (the appliers
of each object type), `apply` (`sync_push`, the loop over the changes, under the user's push lock). The
last-write-wins key itself is `apps.sync.clocks.lww_key`.
"""
