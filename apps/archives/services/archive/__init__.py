"""Account archives: a zip of everything an account holds, and its import into an empty or existing account.

    manifest.json      {"format": "lorekeeper-archive", "version": 1, "created_at", "counts"}
    characters.jsonl   one character per line: its uid, clock and card fields, and `avatar`, its picture's member
    avatars/<uid>.<png|jpg|webp>  a character's picture, as uploaded (checked again as an upload is on import)
    chats.jsonl        one chat per line: uid, title, the characters' uids, integrity, file
    chats/<uid>.jsonl  the chat as SillyTavern JSONL (header line first), as the chat export writes it
    entities.jsonl     the entity registry (name, type, aliases, the character's uid or none)
    memories.jsonl     one memory per line, message memories left out (they are made again from the chats),
                       with its chain by uid: superseded_by, contradicts; vectors left out (embedded again)
    decisions.jsonl    each memory's decisions (why it is here, why it left), naming memories by uid
    lorebooks.jsonl    one lorebook per line: uid, clock, name, scope, the World Info file's own keys, file
    lorebooks/<uid>.jsonl  the book's entries, one per line, as SillyTavern writes an entry
    settings.json      the settings document with its clock
    tombstones.jsonl   what was deleted (type, uid, clock), so a merge does not bring it back

An import merges by the sync rules (apps/sync/services/push/): an object under a uid already here is replaced
when the archive's version descends from it, kept when it descends from the archive's, and a conflict goes to the
later write (then instance priority); tombstones hold. A restore is the same merge that also brings back what was
deleted since (tombstoned objects come back). A chat already here under the archive's uid is kept when its
integrity differs, the archive's version saved beside it as a revision that can be restored (a restore does the
opposite: the archive's version comes back, the current one saved as a revision). Nothing is ever lost.
A lorebook merges whole, as a character does; its clock counts changes to its entries too
(apps/archives/services/archive/import_lorebooks.py).
All of it in one transaction: an archive with a bad line changes nothing, and the error names the file and line.
Every line is checked with the API's serializers before it is stored (apps/archives/services/archive/records.py), and
every member is streamed, its bytes counted as they are unpacked (apps/archives/services/archive/reader.py).

The modules: format.py (the format's name and version, ArchiveError), export.py (`archive_write`), importing.py
(`archive_import`, its steps in order) with merge.py (the import's state and merge rules), import_chats.py,
import_memories.py, decisions.py and import_lorebooks.py (the steps by kind), reader.py and records.py (reading and
checking what an archive holds).
"""
