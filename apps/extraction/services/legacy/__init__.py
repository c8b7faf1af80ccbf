"""Importers for what SillyTavern memory extensions (docs/GLOSSARY.md) leave in a chat, mapped onto our memories. The
chat is read, never changed: its metadata and messages keep every key as imported, and importing again adds only what
is new (each memory remembers the item it came from, `data.legacy`).

- ST-BME's legacy graph, `chat_metadata.st_bme_graph` (an object, or the same as a JSON string; newer versions
  keep it only as a migration source): nodes by type — event → event, character and location → the state ledger,
  rule and reflection → fact, thread → arc, pov_memory → what its owner believes (epistemic), synopsis and the
  summary state → the chat's summary; edges: contradicts, and the characters and places an event involves.
  Nodes compressed into a parent (archived, with a parent) are left out: the parent covers them. (bme.py)
- Smart Memory, `chat_metadata.smartMemory`: the summary (with its summaryEnd), session memories (with their
  entities and supersession), scene history, story arcs and arc summaries, profiles, the state ledger. The
  long-term tier lives in SillyTavern's settings.json (`extension_settings.smart_memory.characters[name]`), not
  in the chat: given that object, its memories, canon, persistent arcs, relationship history and epistemic
  knowledge are imported for the chat's characters. (smart.py)
- ST-Auto-Summarize / auto-recap, `message.extra.auto_recap_memory` (older: `auto_summarize_memory`,
  `qvink_memory`): each message's summary, and each scene break's current recap (plain text or one of its JSON
  shapes); `chat_metadata.auto_recap_running_scene_recaps`' current version as the summary. (recap.py)
A chat keeps one rolling summary: a legacy summary is imported only when the chat has none yet.

run.py holds the entry points (`legacy_found`, `chat_legacy_import`); common.py what the importers share: the
item they read, and how items become memories.
"""
