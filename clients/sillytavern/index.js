// Lorekeeper for SillyTavern: every chat mirrored to a Lorekeeper server as it changes, and the memory it keeps
// injected before every reply. The logic lives in lib/ (plain modules the Node tests load); this file wires it
// to SillyTavern: settings, the panel, events, the generate interceptor, macros and recall cards.

import { Api, LorekeeperError } from './lib/api.js';
import { renderRecallCards } from './lib/recall.js';
import { IndexedDbStore } from './lib/store.js';
import { ChatSync, MergeDeferred, withRecall } from './lib/sync.js';

const MODULE = 'lorekeeper';
const FOLDER = new URL('.', import.meta.url).pathname;
/** @type {{server_url: string, api_token: string, sync: boolean, inject: boolean, timeout_ms: number}} */
const DEFAULTS = { server_url: 'http://127.0.0.1:8720', api_token: '', sync: true, inject: true, timeout_ms: 3000 };
// Lorekeeper's 13 memory slots, by SillyTavern extension prompt key (the context answer names the same keys).
const SLOT_NAMES = ['short', 'long', 'profiles', 'canon', 'triggered', 'session', 'scenes', 'arcs', 'relationships', 'epistemic', 'state_ledger', 'repair', 'unified'];
const SLOT_KEYS = SLOT_NAMES.map((name) => `smart_memory_${name}`);
// The {{smartmemory-*}} macros: one per tier and the unified one (triggered and repair have none).
const MACRO_NAMES = SLOT_NAMES.filter((name) => name !== 'triggered' && name !== 'repair').map((name) => `smartmemory-${name.replaceAll('_', '-')}`);
const POLL_MS = 2000;

const store = new IndexedDbStore();
/** @type {ChatSync|null} */
let current = null;
let generating = false;
let intercepting = false;
let replacing = false;
/** @type {Record<string, string>} */
let macroValues = {};
let outageToastShown = false;
/** @type {Api|null} */
let apiCache = null;

/** The SillyTavern context, fresh each time (its `chat` and `chatMetadata` are replaced when a chat opens). */
function ctx() {
    return SillyTavern.getContext();
}

function settings() {
    const all = ctx().extensionSettings;
    all[MODULE] = { ...DEFAULTS, ...(all[MODULE] ?? {}) };
    return all[MODULE];
}

function api() {
    const s = settings();
    if (!apiCache || apiCache.serverUrl !== s.server_url.replace(/\/+$/, '') || apiCache.token !== s.api_token) {
        apiCache = new Api({ serverUrl: s.server_url, token: s.api_token });
    }
    return apiCache;
}

/**
 * The stable name of the open chat, the same on every device: its file name with its character's avatar (or its
 * group's id). Null when no chat is open.
 */
export function clientKey() {
    const c = ctx();
    const chatId = c.getCurrentChatId();
    if (!chatId) return null;
    if (c.groupId) return `st:group:${c.groupId}:${chatId}`;
    const character = c.characters[c.characterId];
    return character?.avatar ? `st:char:${character.avatar}:${chatId}` : null;
}

function chatTitle() {
    const c = ctx();
    const chatId = c.getCurrentChatId();
    if (c.groupId) return `${c.groups.find((g) => g.id === c.groupId)?.name ?? 'Group'} — ${chatId}`;
    return String(chatId ?? 'Chat');
}

/** @type {import('./lib/sync.js').Host} */
const host = {
    snapshot() {
        const c = ctx();
        return { messages: c.chat, metadata: c.chatMetadata ?? {} };
    },
    async replace(state) {
        const c = ctx();
        replacing = true;
        try {
            c.chat.splice(0, c.chat.length, ...state.messages);
            for (const key of Object.keys(c.chatMetadata)) delete c.chatMetadata[key];
            Object.assign(c.chatMetadata, state.metadata);
            await c.saveChat();
            await c.reloadCurrentChat();
        } finally {
            replacing = false;
        }
    },
    busy() {
        // Mid-reply the last message still changes (the interceptor, before the reply, may send the pending
        // message); while a chat loads or is replaced the array is not the chat.
        return (generating && !intercepting) || replacing || current === null || clientKey() !== current.clientKey || (ctx().chat.length === 0 && (current.base?.messages.length ?? 0) > 0);
    },
    canReplace() {
        // Swapping the chat under a generation being prepared would break it: merges wait for the reply.
        return !generating && !intercepting;
    },
};

// ------------------------------------------------------------------------------------------------ status

/** @param {{state: string, message: string, pending?: number}} status */
function showStatus(status) {
    const element = document.getElementById('lorekeeper_status');
    if (!element) return;
    element.textContent = status.message;
    element.dataset.state = status.state;
}

async function refreshStory() {
    const element = document.getElementById('lorekeeper_story');
    if (!element) return;
    if (!current?.chatId) {
        element.innerHTML = '<span class="lorekeeper-muted">No chat linked.</span>';
        return;
    }
    try {
        const [chat, memories, pipeline] = await Promise.all([
            api().getChat(current.chatId),
            api().memoryCount(current.chatId),
            api().pipeline(current.chatId).catch(() => null),
        ]);
        const url = `${api().serverUrl}/chats/${current.chatId}/`;
        const progress = pipeline ? pipelineText(pipeline) : '';
        element.innerHTML = `
            <div>Memories: <b data-lorekeeper-memories>${memories}</b></div>
            <div>Indexed for recall: ${chat.indexed_messages} of ${chat.total_messages} messages${chat.pending ? ` (${chat.pending} pending)` : ''}</div>
            ${progress ? `<div>Extraction: ${progress}</div>` : ''}
            <a href="${url}" target="_blank" rel="noopener">Open in Lorekeeper</a>`;
    } catch (error) {
        element.textContent = `Story panel unavailable: ${error instanceof Error ? error.message : error}`;
    }
}

/** @param {any} pipeline */
function pipelineText(pipeline) {
    const states = { running: 'running', queued: 'queued', paused: 'paused', idle: 'up to date', off: 'off in your settings', no_model: 'no model set up' };
    const state = states[pipeline.state] ?? pipeline.state;
    const covered = (pipeline.coverage ?? []).map((/** @type {any} */ c) => c.through);
    const through = covered.length ? Math.min(...covered) : null;
    const progress = through !== null && pipeline.message_count ? `${through} of ${pipeline.message_count} messages` : '';
    const failed = pipeline.failed?.length ? ` · ${pipeline.failed.length} failed (retry in Lorekeeper)` : '';
    return [progress, state].filter(Boolean).join(' · ') + failed;
}

// ------------------------------------------------------------------------------------------------ binding

async function bindOpenChat() {
    current?.close();
    current = null;
    const s = settings();
    const key = clientKey();
    if (!key || !s.sync || !api().configured) {
        showStatus({ state: 'off', message: !api().configured ? 'Not connected: set the server URL and token.' : key ? 'Sync is off.' : 'No chat open.' });
        clearSlots();
        refreshStory();
        return;
    }
    const sync = new ChatSync({ api: api(), store, host, clientKey: key, title: chatTitle(), onStatus: showStatus });
    current = sync;
    showStatus({ state: 'binding', message: 'Linking this chat with Lorekeeper…' });
    try {
        await sync.bind();
        if (current !== sync) return;
        await sync.flush();
        outageToastShown = false;
    } catch (error) {
        if (current !== sync) return;
        if (error instanceof LorekeeperError && error.offline) {
            showStatus({ state: 'offline', message: `Offline: ${error.message} Retrying…` });
            setTimeout(() => current === sync && sync.chatId === null && bindOpenChat(), 5000);
        } else {
            showStatus({ state: 'error', message: `Could not link this chat: ${error instanceof Error ? error.message : error}` });
        }
    }
    drawCards();
    refreshStory();
}

function changed() {
    if (current?.chatId) current.schedule();
}

// ------------------------------------------------------------------------------------------------ injection

function clearSlots() {
    const c = ctx();
    for (const key of SLOT_KEYS) c.setExtensionPrompt(key, '', 0, 0, false, 0);
    macroValues = {};
}

/** @param {Promise<any>} promise @param {number} ms */
function withTimeout(promise, ms) {
    return Promise.race([
        promise,
        new Promise((_, reject) => setTimeout(() => reject(new LorekeeperError('Lorekeeper did not answer in time.', { offline: true })), Math.max(0, ms))),
    ]);
}

/**
 * The generate interceptor (manifest `generate_interceptor`): awaited by SillyTavern before it builds the prompt.
 * Sends the pending message (so Lorekeeper has it), asks for the context, and sets the 13 slots. A slow or absent
 * Lorekeeper costs at most the time-out: the slots are cleared and the reply is generated anyway.
 * @param {any[]} chat the chat about to be sent (copies; the pending user message is in it)
 * @param {number} _contextSize
 * @param {(immediately: boolean) => void} _abort
 * @param {string} type normal, regenerate, swipe, continue, impersonate, quiet…
 */
async function interceptor(chat, _contextSize, _abort, type) {
    const s = settings();
    if (!s.inject || type === 'quiet' || type === 'impersonate') return;
    const sync = current;
    if (!sync || sync.chatId === null) {
        clearSlots();
        return;
    }
    const deadline = performance.now() + Number(s.timeout_ms || DEFAULTS.timeout_ms);
    const c = ctx();
    /** @type {{message?: string, character?: string}} */
    const body = {};
    // A regeneration or a swipe sends no message: the turn's stored recall is used.
    if (type !== 'regenerate' && type !== 'swipe' && type !== 'continue') {
        const pending = [...chat].reverse().find((m) => m.is_user && !m.is_system);
        if (pending) body.message = pending.mes;
    }
    if (c.groupId && c.name2) body.character = c.name2;
    try {
        intercepting = true; // before the reply starts: the pending message may go now
        try {
            await withTimeout(sync.flush(), deadline - performance.now());
        } catch (error) {
            // Another device wrote: the merge waits for the reply, and the context is built from what Lorekeeper has.
            if (!(error instanceof MergeDeferred)) throw error;
        } finally {
            intercepting = false;
        }
        const answer = await api().context(sync.chatId, body, Math.max(1, deadline - performance.now()));
        for (const prompt of answer.sillytavern ?? []) {
            c.setExtensionPrompt(prompt.key, prompt.value ?? '', prompt.position, prompt.depth, Boolean(prompt.scan), prompt.role);
        }
        macroValues = answer.macros ?? {};
        const recall = answer.recall;
        if (recall?.stored && recall.bme_recall && Number.isInteger(recall.message_index)) {
            const index = recall.message_index;
            if (c.chat[index]) {
                const updated = withRecall(c.chat[index], recall.bme_recall);
                c.chat[index].extra = updated.extra;
                if (updated.swipe_info) c.chat[index].swipe_info = updated.swipe_info;
            }
            sync.acknowledgeRecall(index, recall.bme_recall, answer.integrity);
            c.saveChat?.();
        }
        outageToastShown = false;
        setTimeout(drawCards, 0);
    } catch (error) {
        clearSlots();
        if (!outageToastShown) {
            outageToastShown = true;
            const reason = error instanceof Error ? error.message : String(error);
            globalThis.toastr?.warning(`${reason} This reply is generated without memory.`, 'Lorekeeper');
        }
    }
}

function registerMacros() {
    const c = ctx();
    for (const name of MACRO_NAMES) {
        try {
            c.registerMacro(name, () => macroValues[`{{${name}}}`] ?? macroValues[name] ?? '');
        } catch (error) {
            console.warn('[Lorekeeper] could not register macro', name, error);
        }
    }
}

// ------------------------------------------------------------------------------------------------ recall cards

/**
 * Run a recall action on message `index` and put its answer into the live chat.
 * @param {number} index
 * @param {(chatId: number, integrity: string) => Promise<{recall: any, integrity: string}>} call
 */
async function recallAction(index, call) {
    const sync = current;
    if (!sync?.chatId) throw new Error('This chat is not linked with Lorekeeper.');
    await sync.flush();
    const answer = await call(sync.chatId, /** @type {string} */ (sync.integrity));
    const c = ctx();
    if (c.chat[index]) {
        const updated = withRecall(c.chat[index], answer.recall ?? null);
        c.chat[index].extra = updated.extra;
        if (updated.swipe_info) c.chat[index].swipe_info = updated.swipe_info;
    }
    sync.acknowledgeRecall(index, answer.recall ?? null, answer.integrity);
    await c.saveChat();
    drawCards();
}

function drawCards() {
    renderRecallCards(ctx().chat, document, {
        edit: (index, text) => recallAction(index, (id, integrity) => api().recallEdit(id, index, text, integrity)),
        remove: (index) => recallAction(index, (id, integrity) => api().recallDelete(id, index, integrity)),
        rerun: (index) => recallAction(index, (id, integrity) => api().recallRerun(id, index, integrity)),
    });
}

// ------------------------------------------------------------------------------------------------ panel

async function testConnection() {
    const s = settings();
    showStatus({ state: 'binding', message: `Testing ${s.server_url}…` });
    try {
        await api().ping();
        showStatus({ state: 'synced', message: `Connected to ${s.server_url}.` });
        await bindOpenChat();
    } catch (error) {
        const status = error instanceof LorekeeperError ? error.status : 0;
        const hint = status === 401 ? ' Check the token.' : status === 0 ? ' Check the URL, and that Lorekeeper allows this origin (LOREKEEPER_CORS_ORIGINS).' : '';
        showStatus({ state: 'error', message: `Connection failed: ${error instanceof Error ? error.message : error}${hint}` });
    }
}

async function addPanel() {
    const html = await (await fetch(`${FOLDER}settings.html`)).text();
    const container = document.getElementById('extensions_settings2') ?? document.getElementById('extensions_settings');
    container?.insertAdjacentHTML('beforeend', html);
    const s = settings();
    const field = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (document.getElementById(id));
    field('lorekeeper_server_url').value = s.server_url;
    field('lorekeeper_api_token').value = s.api_token;
    field('lorekeeper_sync').checked = s.sync;
    field('lorekeeper_inject').checked = s.inject;
    field('lorekeeper_timeout_ms').value = String(s.timeout_ms);
    const save = () => {
        s.server_url = field('lorekeeper_server_url').value.trim();
        s.api_token = field('lorekeeper_api_token').value.trim();
        s.sync = field('lorekeeper_sync').checked;
        s.inject = field('lorekeeper_inject').checked;
        s.timeout_ms = Math.min(60000, Math.max(200, Number(field('lorekeeper_timeout_ms').value) || DEFAULTS.timeout_ms));
        ctx().saveSettingsDebounced();
    };
    for (const id of ['lorekeeper_server_url', 'lorekeeper_api_token', 'lorekeeper_timeout_ms']) field(id).addEventListener('change', save);
    field('lorekeeper_sync').addEventListener('change', () => {
        save();
        bindOpenChat();
    });
    field('lorekeeper_inject').addEventListener('change', () => {
        save();
        if (!s.inject) clearSlots();
    });
    document.getElementById('lorekeeper_test')?.addEventListener('click', testConnection);
    document.getElementById('lorekeeper_story_refresh')?.addEventListener('click', refreshStory);
    // Fresh figures whenever the panel is opened.
    document.querySelector('.lorekeeper-settings .inline-drawer-toggle')?.addEventListener('click', () => setTimeout(refreshStory, 0));
}

// ------------------------------------------------------------------------------------------------ start

globalThis.lorekeeperGenerateInterceptor = interceptor;
/** What the extension is doing, for a person debugging in the console and for the end-to-end tests. */
globalThis.lorekeeperState = () => ({
    generating,
    intercepting,
    replacing,
    chatId: current?.chatId ?? null,
    clientKey: current?.clientKey ?? null,
    integrity: current?.integrity ?? null,
    status: current?.status ?? null,
    queue: current?.queue.length ?? 0,
    conflicts: current?.conflicts ?? 0,
});

(async function start() {
    const c = ctx();
    settings();
    await addPanel();
    registerMacros();
    const events = c.eventTypes;
    c.eventSource.on(events.CHAT_CHANGED, () => {
        if (current && clientKey() === current.clientKey) {
            changed();
            drawCards();
            return;
        }
        bindOpenChat();
    });
    c.eventSource.on(events.GENERATION_STARTED, (/** @type {string} */ _type, /** @type {any} */ _options, /** @type {boolean} */ dryRun) => {
        if (!dryRun) generating = true;
    });
    const ended = () => {
        generating = false;
        changed();
        setTimeout(drawCards, 0);
        if (document.getElementById('lorekeeper_story')?.offsetParent) setTimeout(refreshStory, 1000);
    };
    c.eventSource.on(events.GENERATION_ENDED, ended);
    c.eventSource.on(events.GENERATION_STOPPED, ended);
    for (const name of ['MESSAGE_SENT', 'MESSAGE_RECEIVED', 'MESSAGE_EDITED', 'MESSAGE_DELETED', 'MESSAGE_SWIPED', 'MESSAGE_UPDATED', 'MESSAGE_SWIPE_DELETED', 'MESSAGE_REASONING_EDITED', 'MESSAGE_REASONING_DELETED']) {
        if (events[name]) c.eventSource.on(events[name], changed);
    }
    for (const name of ['USER_MESSAGE_RENDERED', 'MORE_MESSAGES_LOADED']) {
        if (events[name]) c.eventSource.on(events[name], () => setTimeout(drawCards, 0));
    }
    // /hide and moving messages emit nothing: compare with the last synced state every few seconds as well.
    setInterval(() => {
        if (document.visibilityState !== 'hidden') changed();
    }, POLL_MS);
    window.addEventListener('online', changed);
    await bindOpenChat();
})();
