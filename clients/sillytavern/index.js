// Lorekeeper for SillyTavern: every chat mirrored to a Lorekeeper server as it changes, and the memory it keeps
// injected before every reply. The logic is in lib/ (modules the Node tests load); this file wires it to SillyTavern:
// settings, events, the generate interceptor, macros, recall cards. The panel: panel.js; World Info: world-info-sync.js.

import { Api, LorekeeperError } from './lib/api.js';
import { LINK_RETRY_MIN_MS, linkRetry, serverUrlProblem, tokenProblem } from './lib/connection.js';
import { extensionPrompts, macroTexts } from './lib/prompts.js';
import { recallFits, renderRecallCards } from './lib/recall.js';
import { notSyncedReason, storedSettings } from './lib/settings.js';
import { IndexedDbStore } from './lib/store.js';
import { ChatSync, MergeDeferred, NotNow, Superseded, withRecall } from './lib/sync.js';
import { settingsPanel } from './panel.js';
import { bookSender } from './world-info-sync.js';

const MODULE = 'lorekeeper';
const FOLDER = new URL('.', import.meta.url).pathname;
/** @type {{server_url: string, api_token: string, sync: boolean, sync_assistant: boolean, inject: boolean, timeout_ms: number}} */
const DEFAULTS = { server_url: 'http://127.0.0.1:8720', api_token: '', sync: true, sync_assistant: false, inject: true, timeout_ms: 3000 };
// Lorekeeper's 13 memory slots, by SillyTavern extension prompt key (the context answer names the same keys).
const SLOT_NAMES = ['short', 'long', 'profiles', 'canon', 'triggered', 'session', 'scenes', 'arcs', 'relationships', 'epistemic', 'state_ledger', 'repair', 'unified'];
const SLOT_KEYS = SLOT_NAMES.map((name) => `smart_memory_${name}`);
// The {{smartmemory-*}} macros: one per tier and the unified one (triggered and repair have none).
const MACRO_NAMES = SLOT_NAMES.filter((name) => name !== 'triggered' && name !== 'repair').map((name) => `smartmemory-${name.replaceAll('_', '-')}`);
const POLL_MS = 2000;

const store = new IndexedDbStore();
/** @type {ChatSync|null} */
let current = null;
let intercepting = false;
let replacing = false;
/** @type {Record<string, string>} */
let macroValues = {};
let outageToastShown = false;
/** The wait before the next attempt to link the open chat while Lorekeeper does not answer (lib/connection.js). */
let linkRetryMs = LINK_RETRY_MIN_MS;
/** The open chat's next attempt at linking, while one waits (a timer), and the time before which Lorekeeper's
 * Retry-After asked for none. */
let relinkTimer = 0;
let relinkNotBefore = 0;
/** @type {Api|null} */
let apiCache = null;

/** The SillyTavern context, fresh each time (its `chat` and `chatMetadata` are replaced when a chat opens). */
function ctx() {
    return SillyTavern.getContext();
}

/** The stored settings object itself (never a copy: the panel writes into it and SillyTavern saves it). */
function settings() {
    return storedSettings(ctx().extensionSettings, MODULE, DEFAULTS);
}

function api() {
    const s = settings();
    if (!apiCache || apiCache.serverUrl !== s.server_url.replace(/\/+$/, '') || apiCache.token !== s.api_token) {
        apiCache = new Api({ serverUrl: s.server_url, token: s.api_token });
    }
    return apiCache;
}

/** Sends the open chat's World Info books where they changed (world-info-sync.js). */
const syncBooks = bookSender({ ctx, api, linked: () => current, syncing: () => Boolean(settings().sync) });

/** The panel in the Extensions drawer, and the open chat's status and story there (panel.js). */
const panel = settingsPanel({
    ctx,
    settings,
    api,
    linked: () => current,
    relink: bindOpenChat,
    clearSlots,
    folder: FOLDER,
    defaultTimeoutMs: DEFAULTS.timeout_ms,
});
const { showStatus, refreshStory } = panel;

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

/** SillyTavern is writing a reply (it marks the page from the moment a send starts until the reply is saved). */
function isGenerating() {
    return document.body.dataset.generating === 'true';
}

/** @type {import('./lib/sync.js').Host} */
const host = {
    owns(key) {
        return clientKey() === key;
    },
    snapshot() {
        const c = ctx();
        return { messages: c.chat, metadata: c.chatMetadata ?? {} };
    },
    async replace(state) {
        // Not reloadCurrentChat: it empties the chat array for a while and closes an open editor. The array is
        // replaced in one step, saved, and the messages drawn again.
        const c = ctx();
        replacing = true;
        try {
            c.chat.splice(0, c.chat.length, ...state.messages);
            for (const key of Object.keys(c.chatMetadata)) delete c.chatMetadata[key];
            Object.assign(c.chatMetadata, state.metadata);
            await c.saveChat();
            document.getElementById('chat')?.replaceChildren();
            await c.printMessages();
        } finally {
            replacing = false;
        }
        drawCards();
    },
    busy() {
        // Mid-reply the last message still changes (the interceptor, before the reply, may send the pending
        // message); while the chat is replaced it is not to be read.
        return (isGenerating() && !intercepting) || replacing;
    },
    canReplace() {
        // Swapping the chat under a reply being prepared, or under a message being edited, would lose it.
        return !isGenerating() && !intercepting && !replacing && !document.getElementById('curEditTextarea');
    },
};

// ------------------------------------------------------------------------------------------------ binding

async function bindOpenChat() {
    clearTimeout(relinkTimer);
    relinkTimer = 0;
    current?.close();
    current = null;
    const s = settings();
    const key = clientKey();
    const c = ctx();
    const why = notSyncedReason({
        configured: api().configured,
        urlProblem: serverUrlProblem(s.server_url),
        tokenProblem: tokenProblem(s.api_token),
        clientKey: key,
        avatar: c.groupId ? null : (c.characters[c.characterId]?.avatar ?? null),
        assistantAvatar: c.accountStorage?.getItem('assistant') ?? null,
        sync: Boolean(s.sync),
        syncAssistant: Boolean(s.sync_assistant),
        inject: Boolean(s.inject),
    });
    if (why) {
        showStatus({ state: 'off', message: why });
        clearSlots();
        refreshStory();
        return;
    }
    /** @type {ChatSync} */
    const sync = new ChatSync({
        api: api(),
        store,
        host,
        clientKey: key,
        title: chatTitle(),
        onStatus: (status) => current === sync && showStatus(status),
    });
    current = sync;
    macroValues = {};
    showStatus({ state: 'binding', message: 'Linking this chat with Lorekeeper…' });
    let bound = false; // once linked, ChatSync sends what waits and tries again itself, with its own status
    const again = (ms, notBefore = 0) => {
        relinkNotBefore = notBefore;
        relinkTimer = setTimeout(() => {
            relinkTimer = 0;
            if (current === sync && !bound) bindOpenChat();
        }, ms);
    };
    try {
        await sync.bind();
        bound = true;
        linkRetryMs = LINK_RETRY_MIN_MS;
        if (current !== sync) return;
        preloadMacros(sync);
        await sync.flush();
        outageToastShown = false;
        syncBooks();
    } catch (error) {
        if (current !== sync) return;
        // Once linked, what waited and could not be sent is ChatSync's to send: it says so and tries again itself.
        if (!bound) linkFailed(error, again);
    }
    drawCards();
    refreshStory();
}

/**
 * The open chat could not be linked: try again in a second when SillyTavern was still switching it (or writing a
 * reply, or editing a message, under which Lorekeeper's version cannot replace it), later each
 * time while Lorekeeper does not answer (lib/connection.js linkRetry), else say why.
 * @param {unknown} error
 * @param {(ms: number) => void} again
 */
function linkFailed(error, again) {
    if (error instanceof Superseded || error instanceof NotNow || error instanceof MergeDeferred) {
        again(1000); // a switch to another chat makes a new link of its own; a reply or an edit under way ends
    } else if (error instanceof LorekeeperError && error.offline) {
        const { waitMs, nextMs } = linkRetry(linkRetryMs, error.retryAfter);
        linkRetryMs = nextMs;
        const seconds = Math.round(waitMs / 1000);
        showStatus({ state: 'offline', message: `Offline: ${error.message} Trying again in ${seconds} s (Test connection tries now)…` });
        again(waitMs, error.retryAfter ? Date.now() + error.retryAfter * 1000 : 0);
    } else {
        showStatus({ state: 'error', message: `Could not link this chat: ${error instanceof Error ? error.message : error}` });
    }
}

/**
 * The network came back, or the person came back to the tab: the open chat waiting to be linked again is linked now
 * rather than at its timer, unless Lorekeeper asked for the wait (Retry-After). A wait that goes on stays as long.
 */
function relinkNow() {
    if (!relinkTimer || Date.now() < relinkNotBefore) return;
    bindOpenChat();
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
    // The pending message as SillyTavern stores it (the interceptor's copies may carry prompt-only changes), and
    // only when it is the chat's last: a regeneration, a swipe, a continuation or a group's next speaker sends none,
    // so the turn's stored recall is used.
    const last = c.chat[c.chat.length - 1];
    if (!['regenerate', 'swipe', 'continue'].includes(type) && last?.is_user && !last.is_system) body.message = last.mes;
    if (c.groupId && c.name2) body.character = c.name2;
    try {
        intercepting = true; // before the reply starts: the pending message may go now
        try {
            await withTimeout(sync.flush(), deadline - performance.now());
        } catch {
            // Not sent (offline, another device wrote first, time-out): the context is built from what Lorekeeper has.
        } finally {
            intercepting = false;
        }
        if (current !== sync) {
            clearSlots();
            return;
        }
        const answer = await api().context(sync.chatId, body, Math.max(1, deadline - performance.now()));
        if (current !== sync || !host.owns(sync.clientKey)) {
            clearSlots(); // another chat was opened meanwhile: this answer is not its memory
            return;
        }
        for (const prompt of extensionPrompts(answer.sillytavern, SLOT_KEYS)) {
            c.setExtensionPrompt(prompt.key, prompt.value, prompt.position, prompt.depth, prompt.scan, prompt.role);
        }
        macroValues = macroTexts(answer.macros);
        const recall = answer.recall;
        if (recall?.stored && recall.bme_recall && Number.isInteger(recall.message_index)) {
            if (recallFits(ctx().chat[recall.message_index], recall.bme_recall)) {
                putRecall(recall.message_index, recall.bme_recall);
                sync.acknowledgeRecall(recall.message_index, recall.bme_recall, answer.integrity);
                ctx().saveChat?.();
            } else {
                sync.readBack(); // another message stands there: the next sync reads Lorekeeper's chat and merges
            }
        }
        outageToastShown = false;
        setTimeout(drawCards, 0);
    } catch (error) {
        clearSlots();
        if (!outageToastShown) {
            outageToastShown = true;
            const reason = error instanceof Error ? error.message : String(error);
            // The reason can quote what the server was sent (a book's regex key): text, never HTML, whatever the
            // page's toastr defaults.
            globalThis.toastr?.warning(`${reason} This reply is generated without memory.`, 'Lorekeeper', { escapeHtml: true });
        }
    }
}

/**
 * Write a recall record into SillyTavern's message as Lorekeeper wrote it into its own.
 * @param {number} index
 * @param {any} record null removes it
 */
function putRecall(index, record) {
    const message = ctx().chat[index];
    if (!message) return;
    const updated = withRecall(message, record);
    message.extra = updated.extra;
    if (updated.swipe_info) message.swipe_info = updated.swipe_info;
}

/**
 * The macros of the last context built for the chat, so cards and templates that use them have the chat's memory
 * from the first reply after a page load. (SillyTavern fills card fields before the interceptor runs: a card's
 * macro shows the context built for the previous reply.)
 * @param {ChatSync} sync
 */
async function preloadMacros(sync) {
    try {
        const last = await api().lastContext(/** @type {number} */ (sync.chatId));
        if (current === sync && !Object.keys(macroValues).length) macroValues = macroTexts(last.macros);
    } catch {
        // Nothing built yet, or offline: the first reply's context fills them.
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
    if (current !== sync || !host.owns(sync.clientKey)) return; // another chat is open now: Lorekeeper has it
    putRecall(index, answer.recall ?? null);
    sync.acknowledgeRecall(index, answer.recall ?? null, answer.integrity);
    await ctx().saveChat();
    drawCards();
}

function drawCards() {
    renderRecallCards(ctx().chat, document, {
        edit: (index, text) => recallAction(index, (id, integrity) => api().recallEdit(id, index, text, integrity)),
        remove: (index) => recallAction(index, (id, integrity) => api().recallDelete(id, index, integrity)),
        rerun: (index) => recallAction(index, (id, integrity) => api().recallRerun(id, index, integrity)),
    });
}

// ------------------------------------------------------------------------------------------------ start

globalThis.lorekeeperGenerateInterceptor = interceptor;
/** What the extension is doing, for a person debugging in the console and for the end-to-end tests. */
globalThis.lorekeeperState = () => ({
    generating: isGenerating(),
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
    await panel.add();
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
    const ended = () => {
        changed();
        syncBooks(); // a chat lore linked since, or a book edited without an event: sent where it differs
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
    // A book edited in the World Info panel, the books active in every chat changed, or a character's Additional
    // Lorebooks (saved with SillyTavern's settings): sent again where they differ.
    for (const name of ['WORLDINFO_UPDATED', 'WORLDINFO_SETTINGS_UPDATED', 'SETTINGS_UPDATED']) {
        if (events[name]) c.eventSource.on(events[name], () => setTimeout(syncBooks, 0));
    }
        // /hide and moving messages emit nothing: compare with the last synced state every few seconds as well.
    setInterval(() => {
        if (document.visibilityState !== 'hidden') changed();
    }, POLL_MS);
    window.addEventListener('online', () => {
        relinkNow();
        changed();
    });
    document.addEventListener('visibilitychange', () => document.visibilityState === 'visible' && relinkNow());
    await bindOpenChat();
})();
