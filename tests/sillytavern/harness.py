"""A real SillyTavern for end-to-end tests: installed once from npm into a cache outside the repository, started per
test session on a loopback port of its own with a fresh data root, and driven in Debian's headless Chromium through
Playwright.

The install (`sillytavern_install`) is `npm pack` plus `npm install` into a temporary sibling directory, renamed into
place when complete, under a file lock so two pytest processes never install at once. SillyTavern compiles its
frontend libraries with webpack at every start (a minute or more the first time, a second from a warm cache), into
`<dataRoot>/_webpack`, or into the install's own `dist/_webpack` inside a container: the install ends with one warm-up
start, each instance's data root begins with a copy of its cache, and instances start one at a time.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.servers import free_port

VERSION = "1.19.0"
MIN_NODE = 20
ROOT = Path(__file__).resolve().parents[2]
EXTENSION_SOURCE = ROOT / "clients" / "sillytavern"
EXTENSION_NAME = "lorekeeper"
USER = "default-user"
STARTUP_TIMEOUT = 240.0  # a cold webpack compile can take 95 s on two busy cores
WARM_MARK = "done"


def chromium_path() -> str | None:
    """Debian's chromium: /usr/bin/chromium, or `chromium` on PATH."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium")


def node_version() -> tuple[int, int, int] | None:
    node = shutil.which("node")
    if node is None:
        return None
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.(\d+)\.(\d+)", out.strip())
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore[return-value]


def node_too_old() -> str | None:
    """Why the installed Node cannot run SillyTavern, when it is there but older than it needs (Debian bookworm's
    own `nodejs` is 18): a machine that has what its packages offer cannot do better, so the tests say so and stop
    rather than fail, on CI too."""
    version = node_version()
    if version is not None and version[0] < MIN_NODE:
        found = ".".join(map(str, version))
        return f"Node.js >= {MIN_NODE} (found v{found}; SillyTavern {VERSION} needs {MIN_NODE}+)"
    return None


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run SillyTavern in a browser, in words; empty when nothing is missing."""
    missing = []
    if node_version() is None:
        missing.append(f"Node.js >= {MIN_NODE} (no `node` on PATH)")
    if shutil.which("npm") is None:
        missing.append("npm (no `npm` on PATH)")
    if chromium_path() is None:
        missing.append("Debian's chromium (no /usr/bin/chromium or `chromium` on PATH; apt install chromium)")
    return missing


def install_dir() -> Path:
    default = Path.home() / ".cache" / "lorekeeper" / f"sillytavern-{VERSION}"
    return Path(os.environ.get("LOREKEEPER_SILLYTAVERN_CACHE") or default).expanduser().resolve()


def warm_dir(install: Path) -> Path:
    """Where the warm-up start left its data root (and so the compiled webpack cache)."""
    return install / ".lorekeeper-warm"


def sillytavern_install(*, log: Callable[[str], None] = print) -> Path:
    """The installed SillyTavern, installing and warming it first if needed. Safe to call from several processes."""
    install = install_dir()
    if (warm_dir(install) / WARM_MARK).exists():
        return install
    install.parent.mkdir(parents=True, exist_ok=True)
    with install_lock(install):
        if not install.exists():
            _install(install, log=log)
        if not (warm_dir(install) / WARM_MARK).exists():
            _warm_up(install, log=log)
    return install


@contextmanager
def install_lock(install: Path):
    """An exclusive lock beside the install, held while installing and while an instance starts (in a container
    SillyTavern compiles into the install's own dist/ folder, which concurrent starts would share)."""
    with open(install.with_name(install.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(install: Path, *, log: Callable[[str], None]) -> None:
    for stale in install.parent.glob(install.name + ".partial-*"):  # left by an install that died (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=install.name + ".partial-", dir=install.parent))
    try:
        started = time.monotonic()
        log(f"Installing SillyTavern {VERSION} into {install} (npm pack, npm install: about a minute)")
        _run(["npm", "pack", f"sillytavern@{VERSION}", "--silent"], cwd=staging)
        tarball = next(staging.glob("sillytavern-*.tgz"))
        with tarfile.open(tarball) as archive:
            archive.extractall(staging, filter="data")
        tarball.unlink()
        app = staging / "package"
        _run(["npm", "install", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=app)
        app.rename(install)
        log(f"SillyTavern installed in {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _warm_up(install: Path, *, log: Callable[[str], None]) -> None:
    """Start once so webpack compiles; its cache holds absolute paths, so this runs in the final directory."""
    warm = warm_dir(install)
    shutil.rmtree(warm, ignore_errors=True)
    log("Starting SillyTavern once to compile its frontend (webpack, up to a couple of minutes)")
    started = time.monotonic()
    instance = SillyTavern.create(install=install, root=warm, warm=False)
    instance.start()
    instance.stop()
    (warm / WARM_MARK).write_text(f"{time.monotonic() - started:.1f}\n")
    log(f"SillyTavern warmed up in {time.monotonic() - started:.0f} s")


def _run(command: list[str], *, cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{output}")


def server_config(port: int, data_root: Path) -> dict[str, Any]:
    """config.yaml for a private, offline instance (missing keys take SillyTavern's defaults at start)."""
    return {
        "dataRoot": str(data_root),
        "listen": False,
        "port": port,
        "protocol": {"ipv4": True, "ipv6": False},
        "browserLaunch": {"enabled": False},
        "whitelistMode": False,
        "basicAuthMode": False,
        "enableUserAccounts": False,
        "enableCorsProxy": False,
        "sessionTimeout": -1,
        "logging": {"enableAccessLog": False, "minLogLevel": 1},
        "backups": {"chat": {"enabled": False}},
        "thumbnails": {"enabled": False},
        "extensions": {"enabled": True, "autoUpdate": False, "models": {"autoDownload": False}},
        "enableDownloadableTokenizers": False,
        "enableServerPlugins": False,
        "enableServerPluginsAutoUpdate": False,
        "requestProxy": {"enabled": False},
    }


def user_settings(
    install: Path, *, model_url: str, extension: dict[str, Any] | None = None, stream: bool = False
) -> dict[str, Any]:
    """settings.json for default-user: SillyTavern's own defaults, the Custom (OpenAI-compatible) chat-completion
    source at `model_url`, connecting at load, no welcome screen, and the extension's settings."""
    settings = json.loads((install / "default" / "content" / "settings.json").read_text())
    settings["firstRun"] = False
    settings["main_api"] = "openai"
    settings["power_user"]["auto_connect"] = True
    settings["oai_settings"].update(
        chat_completion_source="custom",
        custom_url=model_url,
        custom_model="scripted-model",
        stream_openai=stream,
    )
    settings["extension_settings"][EXTENSION_NAME] = dict(extension or {})
    return settings


def _json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


_PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def card_png(card: dict[str, Any]) -> bytes:
    """A 1x1 PNG carrying `card` as SillyTavern reads it: base64 JSON in a `chara` tEXt chunk."""
    payload = b"chara\0" + base64.b64encode(json.dumps(card).encode())
    chunk = struct.pack(">I", len(payload)) + b"tEXt" + payload
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + payload) & 0xFFFFFFFF)
    end = _PNG_1x1.rindex(b"IEND") - 4  # before the IEND chunk's length
    return _PNG_1x1[:end] + chunk + _PNG_1x1[end:]


def character_card(
    name: str, *, first_mes: str = "", description: str = "", chat: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A V2 character card (with the V1 fields SillyTavern also reads). `chat` names the character's current chat
    file (without .jsonl): a card without one gets a new chat name each time the server reads it afresh, so after a
    restart the character would open an empty chat."""
    data = {
        "name": name,
        "description": description,
        "personality": "",
        "scenario": "",
        "first_mes": first_mes,
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "", "depth_prompt": {}},
        **extra,
    }
    v1 = {k: data[k] for k in ("name", "description", "personality", "scenario", "first_mes", "mes_example")}
    chat = chat or f"{name} - {time.strftime('%Y-%m-%d@%Hh%Mm%Ss')}000ms"
    return {**v1, "chat": chat, "spec": "chara_card_v2", "spec_version": "2.0", "data": data, "talkativeness": "0.5"}


@dataclass
class SillyTavern:
    """One SillyTavern server: its install, its own data root and config under `root`, its port and its log."""

    install: Path
    root: Path
    port: int
    process: subprocess.Popen | None = None
    warm: bool = True  # start from the warm-up's webpack cache, one start-up at a time (False: the warm-up itself)
    starts: list[float] = field(default_factory=list)  # wall time of each start, in seconds

    @classmethod
    def create(cls, *, install: Path, root: Path, port: int | None = None, warm: bool = True) -> SillyTavern:
        instance = cls(install=install, root=root, port=port or free_port(), warm=warm)
        root.mkdir(parents=True, exist_ok=True)
        instance.user_dir.mkdir(parents=True, exist_ok=True)
        _json(instance.config_path, server_config(instance.port, instance.data_root))
        return instance

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        """The origin the extension's requests come from, for Lorekeeper's CORS."""
        return self.url

    @property
    def data_root(self) -> Path:
        return self.root / "data"

    @property
    def user_dir(self) -> Path:
        return self.data_root / USER

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    @property
    def extension_dir(self) -> Path:
        return self.user_dir / "extensions" / EXTENSION_NAME

    def write_settings(self, settings: dict[str, Any]) -> None:
        """Replace default-user's settings.json (takes effect at the next page load)."""
        _json(self.user_dir / "settings.json", settings)

    def read_settings(self) -> dict[str, Any]:
        return json.loads((self.user_dir / "settings.json").read_text())

    def install_extension(self, source: Path = EXTENSION_SOURCE) -> Path:
        """Copy an extension folder to `<user>/extensions/lorekeeper/`, as a user installs one by hand."""
        if not (source / "manifest.json").exists():
            raise FileNotFoundError(f"no manifest.json in {source}")
        shutil.rmtree(self.extension_dir, ignore_errors=True)
        shutil.copytree(source, self.extension_dir, ignore=shutil.ignore_patterns("node_modules", "test", "tests"))
        return self.extension_dir

    def add_character(self, name: str, **card: Any) -> str:
        """Write a character card PNG (see `character_card`) into `<user>/characters/`; answers its avatar file name.
        SillyTavern reads the folder when the page loads its character list (so call this before opening the page, or
        reload it). Its chats are in `chat_files(name)`."""
        avatar = f"{name}.png"
        path = self.user_dir / "characters" / avatar
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(card_png(character_card(name, **card)))
        return avatar

    def add_group(self, name: str, members: list[str], *, group_id: str | None = None, **extra: Any) -> str:
        """Write a group of the given character avatars (file names) into `<user>/groups/`; answers its id."""
        group_id = group_id or str(int(time.time() * 1000))
        group = {
            "id": group_id,
            "name": name,
            "members": members,
            "avatar_url": "",
            "allow_self_responses": False,
            "activation_strategy": 0,
            "generation_mode": 0,
            "disabled_members": [],
            "fav": False,
            "chat_id": group_id,
            "chats": [group_id],
            "auto_mode_delay": 5,
            "generation_mode_join_prefix": "",
            "generation_mode_join_suffix": "",
            **extra,
        }
        _json(self.user_dir / "groups" / f"{group_id}.json", group)
        return group_id

    def chat_files(self, character: str) -> list[Path]:
        """The chat files of the character whose avatar is `<character>.png`, oldest first."""
        folder = self.user_dir / "chats" / character
        return sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.exists() else []

    def group_chat_file(self, chat_id: str) -> Path:
        return self.user_dir / "group chats" / f"{chat_id}.jsonl"

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def start(self, *, timeout: float = STARTUP_TIMEOUT) -> None:
        """Start `node server.js` and wait until it answers HTTP."""
        if self.running:
            raise RuntimeError("SillyTavern is already running")
        if not self.warm:
            self._start(timeout)
            return
        self._seed_webpack_cache()
        with install_lock(self.install):
            self._start(timeout)

    def _start(self, timeout: float) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SILLYTAVERN_")}
        env.update(NODE_ENV="production", FORCE_COLOR="0", NO_COLOR="1")
        command = ["node", "server.js", "--configPath", str(self.config_path), "--dataRoot", str(self.data_root)]
        command += ["--port", str(self.port), "--listen", "false", "--browserLaunchEnabled", "false"]
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n--- {' '.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                command, cwd=self.install, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = started + timeout
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"SillyTavern exited ({code}) while starting:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/version", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"SillyTavern did not answer within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)
        self.starts.append(time.monotonic() - started)

    def stop(self, *, timeout: float = 10.0) -> None:
        """SIGTERM (SillyTavern saves and exits), then SIGKILL if it lingers."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)

    def restart(self, *, timeout: float = STARTUP_TIMEOUT) -> None:
        self.stop()
        self.start(timeout=timeout)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _seed_webpack_cache(self) -> None:
        source, target = warm_dir(self.install) / "data" / "_webpack", self.data_root / "_webpack"
        if source.exists() and not target.exists():
            shutil.copytree(source, target)


def read_chat_file(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A chat file's header (`chat_metadata`, `user_name`, `character_name`) and its messages."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if lines and "chat_metadata" in lines[0]:
        return lines[0], lines[1:]
    return {}, lines


def wait_until(condition: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.1, message: str = ""):
    """Poll `condition` until it answers something truthy (answered); AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except (OSError, ValueError, KeyError, IndexError) as error:  # a file mid-write, not there yet
            last_error = error
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise AssertionError(f"{message or 'condition'} not met within {timeout} s{detail}")
        time.sleep(interval)


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGE_TIMEOUT = 60.0  # a cold page load is 7-12 s on two cores

# Records every SillyTavern event (with its plain arguments) in `window.__lk.events`, and notes APP_READY, which
# SillyTavern replays to listeners that come late. Added after SillyTavern's and the extensions' own listeners, so an
# event recorded here has been through theirs.
_RECORDER = """() => {
    if (window.__lk) return;
    const { eventSource, eventTypes } = SillyTavern.getContext();
    const lk = (window.__lk = { ready: false, events: [] });
    const plain = (value) => (value === null || ['string', 'number', 'boolean'].includes(typeof value) ? value : null);
    for (const name of new Set(Object.values(eventTypes))) {
        eventSource.on(name, (...args) => { lk.events.push({ event: name, args: args.map(plain) }); });
    }
    eventSource.on(eventTypes.APP_READY, () => { lk.ready = true; });
}"""

_IDLE = "!document.body.dataset.generating"


def open_sillytavern(browser, instance: SillyTavern, *, timeout: float = PAGE_TIMEOUT, console: list | None = None):
    """A new browser context on SillyTavern, loaded and connected to its model. `console`, when given, collects the
    page's console messages and errors as text."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    if console is not None:
        page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.goto(instance.url, timeout=timeout * 1000)
    wait_ready(page, timeout=timeout)
    return page


def wait_ready(page, *, timeout: float = PAGE_TIMEOUT) -> None:
    """Until SillyTavern has initialised (APP_READY), its chat input is there and its API is connected."""
    page.wait_for_function("() => window.SillyTavern?.getContext", timeout=timeout * 1000)
    page.evaluate(_RECORDER)
    page.wait_for_function(
        """() => window.__lk.ready && document.querySelector('#send_textarea')
            && SillyTavern.getContext().onlineStatus !== 'no_connection'""",
        timeout=timeout * 1000,
    )


def reload(page, *, timeout: float = PAGE_TIMEOUT) -> None:
    """Reload the page (after files changed on disk: characters, settings, chats) and wait until it is ready."""
    page.reload(timeout=timeout * 1000)
    wait_ready(page, timeout=timeout)


def events(page, *, since: int = 0, name: str | None = None) -> list[dict[str, Any]]:
    """SillyTavern events recorded since the page was ready (from position `since`), each `{event, args}`."""
    recorded = page.evaluate("since => window.__lk.events.slice(since)", since)
    return [e for e in recorded if name is None or e["event"] == name]


def event_count(page) -> int:
    return page.evaluate("() => window.__lk.events.length")


def wait_for_event(page, name: str, *, since: int, timeout: float = 30.0) -> dict[str, Any]:
    """The first `name` event recorded at or after position `since`."""
    page.wait_for_function(
        "([name, since]) => window.__lk.events.slice(since).some(e => e.event === name)",
        arg=[name, since],
        timeout=timeout * 1000,
    )
    return events(page, since=since, name=name)[0]


def wait_idle(page, *, timeout: float = 30.0) -> None:
    """Until no generation is running (SillyTavern clears `body[data-generating]` after saving the reply)."""
    page.wait_for_function(f"() => {_IDLE}", timeout=timeout * 1000)


def live_chat(page) -> list[dict[str, Any]]:
    """The open chat's messages as SillyTavern holds them (dates as ISO strings)."""
    return page.evaluate("() => JSON.parse(JSON.stringify(SillyTavern.getContext().chat))")


def chat_metadata(page) -> dict[str, Any]:
    return page.evaluate("() => JSON.parse(JSON.stringify(SillyTavern.getContext().chatMetadata))")


def current_chat_id(page) -> str | None:
    return page.evaluate("() => SillyTavern.getContext().getCurrentChatId() ?? null")


def chat_file(instance: SillyTavern, page) -> Path:
    """The open chat's file on disk."""
    info = page.evaluate(
        """() => {
            const ctx = SillyTavern.getContext();
            return { group: ctx.groupId ?? null, chat: ctx.getCurrentChatId() ?? null,
                     avatar: ctx.characters[ctx.characterId]?.avatar ?? null };
        }"""
    )
    if not info["chat"]:
        raise AssertionError("no chat is open")
    if info["group"]:
        return instance.group_chat_file(info["chat"])
    return instance.user_dir / "chats" / Path(info["avatar"]).stem / f"{info['chat']}.jsonl"


def _open_entity(page, kind: str, name: str, timeout: float) -> None:
    group, current = page.evaluate(
        """() => {
            const ctx = SillyTavern.getContext();
            const group = ctx.groups.find(g => g.id === ctx.groupId);
            return [!!group, group ? group.name : ctx.characters[ctx.characterId]?.name];
        }"""
    )
    if current == name and group == (kind == "group_select"):
        return  # already open: SillyTavern would not load it again
    if not page.locator("#rm_button_characters").is_visible():
        page.click("#rightNavDrawerIcon")
    page.click("#rm_button_characters")
    block = page.locator(f"#rm_print_characters_block .{kind}").filter(
        has=page.locator(".ch_name", has_text=re.compile(f"^{re.escape(name)}$"))
    )
    since = event_count(page)
    block.first.click()
    wait_for_event(page, "chat_id_changed", since=since, timeout=timeout)
    wait_idle(page, timeout=timeout)


def open_character(page, name: str, *, timeout: float = 30.0) -> None:
    """Open the character's current chat from the character list, as a user does; returns once the chat (and its
    greeting, for a new chat) is loaded and saved."""
    _open_entity(page, "character_select", name, timeout)


def open_group(page, name: str, *, timeout: float = 30.0) -> None:
    """Open the group's current chat from the character list."""
    _open_entity(page, "group_select", name, timeout)


def send_message(page, text: str, *, replies: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Type `text` and press send; returns the chat once `replies` answers (a group may give several) arrived and
    SillyTavern saved it."""
    expected = len(live_chat(page)) + 1 + replies
    page.fill("#send_textarea", text)
    page.click("#send_but")
    page.wait_for_function(
        f"n => SillyTavern.getContext().chat.length >= n && {_IDLE}", arg=expected, timeout=timeout * 1000
    )
    return live_chat(page)


def swipe(page, direction: str = "right", *, timeout: float = 30.0) -> dict[str, Any]:
    """Swipe the last message (right past its last swipe generates a new one); returns that message."""
    index = len(live_chat(page)) - 1
    before = live_chat(page)[index].get("swipe_id", 0)
    page.locator(f"#chat .last_mes .swipe_{direction}").click()
    page.wait_for_function(
        f"""([i, before]) => {{
            const m = SillyTavern.getContext().chat[i];
            return m && (m.swipe_id ?? 0) !== before && Array.isArray(m.swipes) && m.swipe_id < m.swipes.length
                && {_IDLE};
        }}""",
        arg=[index, before],
        timeout=timeout * 1000,
    )
    return live_chat(page)[index]


def start_edit(page, index: int):
    """Open message `index` in SillyTavern's editor (its pencil button) and leave it open."""
    message = page.locator(f'#chat .mes[mesid="{index}"]')
    message.scroll_into_view_if_needed()
    message.hover()
    message.locator(".mes_edit").click()
    page.locator("#curEditTextarea").wait_for()
    return message


def edit_message(page, index: int, text: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """Edit message `index` through its pencil button and confirm; returns the message."""
    message = start_edit(page, index)
    page.locator("#curEditTextarea").fill(text)
    message.locator(".mes_edit_done").click()
    page.wait_for_function(
        "([i, text]) => SillyTavern.getContext().chat[i]?.mes === text && !document.querySelector('#curEditTextarea')",
        arg=[index, text],
        timeout=timeout * 1000,
    )
    return live_chat(page)[index]


def delete_message(page, index: int, *, swipe_only: bool = False, timeout: float = 10.0) -> None:
    """Delete message `index` through its edit menu and the confirmation popup. `swipe_only` deletes just the shown
    swipe (offered for the last message when it has several)."""
    before = live_chat(page)
    start_edit(page, index)
    page.locator(f'#chat .mes[mesid="{index}"] .mes_edit_delete').click()
    if page.evaluate("() => SillyTavern.getContext().powerUserSettings.confirm_message_delete"):
        popup = page.locator("dialog.popup[open]")
        popup.wait_for()
        # The last message with several swipes offers "Delete Swipe" (OK) and "Delete Message" (a custom button).
        custom = popup.locator(".popup-button-custom")
        (popup.locator(".popup-button-ok") if swipe_only or not custom.count() else custom.first).click()
    if swipe_only:
        swipes = len(before[index]["swipes"])
        condition = "([i, n]) => (SillyTavern.getContext().chat[i]?.swipes?.length ?? 0) < n"
        page.wait_for_function(condition, arg=[index, swipes], timeout=timeout * 1000)
    else:
        condition = "n => SillyTavern.getContext().chat.length < n"
        page.wait_for_function(condition, arg=len(before), timeout=timeout * 1000)


def run_command(page, command: str, *, timeout: float = 30.0) -> str:
    """Run a slash command line (`/hide 2`, `/cut 3`) through SillyTavern's parser, as typed into the chat input;
    answers its pipe result."""
    result = page.evaluate(
        """async (command) => {
            const result = await SillyTavern.getContext().executeSlashCommandsWithOptions(command);
            if (result?.isError) throw new Error(result.errorMessage);
            return result?.pipe == null ? '' : String(result.pipe);
        }""",
        command,
    )
    wait_idle(page, timeout=timeout)
    return result


class Relay:
    """A TCP relay in front of a server, which a test can cut (`down`: connections refused, open ones closed) and
    restore (`up`, on the same port): Lorekeeper "stopped" under a running SillyTavern without stopping the test's
    own live server."""

    def __init__(self, target_port: int) -> None:
        import threading

        self.target_port = target_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: set = set()
        self._listener = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        import socket
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        import socket

        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone leaves it listening
            except OSError:
                pass
            listener.close()
        with self._lock:
            for sock in list(self._sockets):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._sockets.clear()

    def _accept(self, listener) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass
            with self._lock:
                self._sockets.discard(source)
                self._sockets.discard(sink)


def move_message(page, index: int, direction: str, *, timeout: float = 10.0) -> None:
    """Move message `index` one place up or down with its edit menu's arrows, then close the editor."""
    before = live_chat(page)
    message = start_edit(page, index)
    message.locator(f".mes_edit_{direction}").click()
    target = index - 1 if direction == "up" else index + 1
    page.wait_for_function(
        "([i, mes]) => SillyTavern.getContext().chat[i]?.mes === mes",
        arg=[target, before[index]["mes"]],
        timeout=timeout * 1000,
    )
    editor = page.locator(f'#chat .mes[mesid="{target}"] .mes_edit_cancel')
    if editor.count():
        editor.click()
