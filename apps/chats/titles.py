"""How a chat's title is shown. SillyTavern names a chat after its file, `Mira - 2026-11-23@14h49m06s448ms`; the
pages show such a title as `Mira, 23 Nov 2026, 14:49` and keep the title itself (the export's file name) unchanged.
A rule of display only: no stored title is rewritten."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# SillyTavern's `humanizedDateTime` (older versions put spaces around the parts and left out the milliseconds;
# apps/chats/services/start.py `chat_file_title` leaves the month and day unpadded).
FILE_NAME = re.compile(
    r"^(?P<names>.+?) - (?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2}) ?@ ?"
    r"(?P<hour>\d{1,2})h ?(?P<minute>\d{1,2})m ?(?P<second>\d{1,2})s(?: ?\d{1,3} ?ms)?(?:\.jsonl)?"
    r"(?P<branch> \(branch(?: at #\d+)?\))?$"  # a branch Lorekeeper made of such a chat (services/branch.py)
)
# A title written when the chat was made (within this of `created_at`, both UTC) is Lorekeeper's own, in UTC.
STARTED_HERE = timedelta(minutes=2)
SHOWN = "{day} {month} {year}, {hour:02d}:{minute:02d}"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class FileNameTitle:
    names: str
    moment: datetime  # naive: the clock of whoever wrote the file name
    utc: bool  # written by Lorekeeper when it started the chat, so the moment is UTC
    branch: str = ""  # " (branch at #12)" after the moment, as the title had it

    @property
    def shown(self) -> str:
        return f"{self.names}, {moment_shown(self.moment)}{self.branch}"


def moment_shown(moment: datetime) -> str:
    """`23 Nov 2026, 14:49`."""
    return SHOWN.format(
        day=moment.day, month=MONTHS[moment.month - 1], year=moment.year, hour=moment.hour, minute=moment.minute
    )


def file_name_title(title: str, created_at: datetime | None = None) -> FileNameTitle | None:
    """The parts of a title that is a SillyTavern file name, None for any other title (or an impossible date).
    A chat imported from SillyTavern carries the clock of the machine that wrote it, whose zone is unknown: its moment
    is shown as written. One Lorekeeper started (`created_at` beside the moment read as UTC) is in UTC."""
    found = FILE_NAME.match(title.strip())
    if found is None:
        return None
    parts = {key: int(value) for key, value in found.groupdict().items() if key not in ("names", "branch")}
    try:
        moment = datetime(**parts)
    except ValueError:
        return None
    utc = created_at is not None and abs(moment.replace(tzinfo=UTC) - created_at) <= STARTED_HERE
    return FileNameTitle(names=found["names"].strip(), moment=moment, utc=utc, branch=found["branch"] or "")


def title_shown(title: str, created_at: datetime | None = None) -> str:
    """The title as a page shows it in plain text (a window's title, a confirmation): a file name's moment as
    written (UTC for a chat Lorekeeper started)."""
    parsed = file_name_title(title, created_at)
    return parsed.shown if parsed else title
