"""Parsers of the tiers' answers, in Smart Memory's line formats (docs/GLOSSARY.md; each prompt under
apps/extraction/prompts/ states its own). They are lenient about what models do to a format (bullets, code fences,
stray spaces, case, a missing importance) and strict about meaning: a line that cannot be understood is returned in
`unparsed`, never guessed at, so the job can record it and the model test can show it.

One module per format family: `lines` (what every answer shares), `memories` (memory and relationship lines),
`arcs`, `epistemics`, `state` (the state ledger), `profiles`, and `prose` (yes/no, continuity verdicts, prose)."""
