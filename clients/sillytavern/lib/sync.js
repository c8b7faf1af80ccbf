// Live sync of one SillyTavern chat with its Lorekeeper chat.
//
// The state Lorekeeper holds is kept as `base` with its `integrity`. After any change the live chat is compared
// with `base + queued writes`; the difference becomes writes in a durable queue, sent in order, each with the
// integrity the previous answer gave and its own Idempotency-Key (so a retry after a lost answer is not applied
// twice). A 409 means another device wrote first: the chat is read back, both sides' changes are merged, the
// merge goes into SillyTavern's chat, and what is left is sent. While Lorekeeper is unreachable the queue waits
// and is retried with a growing pause. Each save of base and queue writes only what changed (saved.js).

import { LorekeeperError, newKey, writesOf } from './api.js';
import { jsonEqual, toJson } from './json.js';
import { applyWrite, applyWrites, mergeStates, planWrites } from './plan.js';
import { SavedChat } from './saved.js';

/** @typedef {import('./plan.js').ChatState} ChatState */
/** @typedef {import('./plan.js').Write} Write */
/** @typedef {import('./store.js').Store} Store */
/** @typedef {import('./store.js').SyncRecord} SyncRecord */

/**
 * What the sync needs of SillyTavern (a fake in the Node tests).
 * @typedef {object} Host
 * @property {() => ChatState} snapshot the live chat (not copied: read it, do not keep it)
 * @property {(state: ChatState) => Promise<void>} replace put a merged chat into SillyTavern and save it
 * @property {(clientKey: string) => boolean} [owns] whether the chat open now is the one with this key (a sync
 *   whose chat is no longer open must neither read nor write SillyTavern's chat)
 * @property {() => boolean} [busy] true while a reply is being generated (the last message is still changing)
 * @property {() => boolean} [canReplace] false while the chat must not be swapped under SillyTavern (a reply is
 *   being prepared); a merge then waits until it is true
 */

/**
 * @typedef {object} SyncStatus
 * @property {'binding'|'synced'|'pending'|'offline'|'conflict'|'error'} state
 * @property {number} pending writes not yet acknowledged
 * @property {string} message what the panel shows
 */

/** A merge that must wait until SillyTavern's chat may be replaced (after the reply being prepared). */
export class MergeDeferred extends Error {}

/** This sync's chat is no longer the open one (or the sync was closed): it stops, touching nothing. */
export class Superseded extends Error {}

/** SillyTavern's chat cannot be read just now (a reply is being written, the chat is loading): try again soon. */
export class NotNow extends Error {}

const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30000;
const MAX_ROUNDS = 50; // plans and sends in one sync, each meeting another device's write at most

/**
 * The chat as a SillyTavern 1.19 file: the header line, then one line per message.
 * @param {ChatState} state
 */
export function toJsonl(state) {
    const header = { chat_metadata: toJson(state.metadata ?? {}), user_name: 'unused', character_name: 'unused' };
    return [header, ...state.messages].map((line) => JSON.stringify(line)).join('\n');
}

/**
 * What two versions of a chat that share no known history certainly had in common: the messages both begin with,
 * and Lorekeeper's metadata (so SillyTavern's metadata wins where they differ).
 * @param {ChatState} live
 * @param {ChatState} remote
 * @returns {ChatState}
 */
export function commonStart(live, remote) {
    let shared = 0;
    while (shared < live.messages.length && shared < remote.messages.length && jsonEqual(live.messages[shared], remote.messages[shared])) {
        shared++;
    }
    return { messages: remote.messages.slice(0, shared), metadata: remote.metadata ?? {} };
}

/** @param {ChatState} state @returns {ChatState} */
function copyState(state) {
    return { messages: state.messages.map(toJson), metadata: toJson(state.metadata ?? {}) };
}

export class ChatSync {
    /**
     * @param {object} options
     * @param {import('./api.js').Api} options.api
     * @param {Store} options.store
     * @param {Host} options.host
     * @param {string} options.clientKey
     * @param {string} [options.title]
     * @param {(status: SyncStatus) => void} [options.onStatus]
     */
    constructor({ api, store, host, clientKey, title = '', onStatus = () => {} }) {
        this.api = api;
        this.saved = new SavedChat(store, clientKey);
        this.host = host;
        this.clientKey = clientKey;
        this.title = title;
        this.onStatus = onStatus;
        /** @type {number|null} */
        this.chatId = null;
        /** @type {string|null} */
        this.integrity = null;
        /**
         * The chat's count of writes as Lorekeeper last answered it (null: not known). It only grows there, so a
         * chat read back with fewer has gone back in time (a database restored from a backup; see reconcile).
         * @type {number|null}
         */
        this.writes = null;
        /** Times Lorekeeper's chat was found gone back in time and this chat sent over it, for the tests. */
        this.restores = 0;
        /** Lorekeeper's chat was found gone back in time, and this chat is not yet sent over it. */
        this.wentBack = false;
        /** @type {ChatState|null} */
        this.base = null;
        /** @type {{write: Write, key: string}[]} */
        this.queue = [];
        /** Lorekeeper's chat changed in a way this device has not seen: read it back before the next write. */
        this.stale = false;
        /** @type {Promise<void>|null} */
        this.running = null;
        this.again = false;
        this.retryMs = RETRY_MIN_MS;
        /** @type {ReturnType<typeof setTimeout>|null} */
        this.timer = null;
        this.closed = false;
        /** @type {SyncStatus} */
        this.status = { state: 'binding', pending: 0, message: 'Connecting to Lorekeeper…' };
        /** Conflicts resolved, for the panel and the tests. */
        this.conflicts = 0;
        /** No retry before this time (ms since the epoch): the back-off, or the server's Retry-After. */
        this.notBefore = 0;
        /** A refusal neither a merge nor sending the whole chat could fix: nothing more until a new sync. */
        this.failed = false;
    }

    /**
     * @param {SyncStatus['state']} state
     * @param {string} message
     */
    setStatus(state, message) {
        this.status = { state, pending: this.queue.length, message };
        this.onStatus(this.status);
    }

    /** Stop here when this sync's chat is no longer the open one (checked after every wait). */
    check() {
        if (this.closed || (this.host.owns && !this.host.owns(this.clientKey))) throw new Superseded('not the open chat');
    }

    /**
     * SillyTavern's chat, when it is this sync's and can be read: Superseded when another chat is open, NotNow while
     * a reply is being written or the chat is (re)loading (SillyTavern empties the array first).
     * @returns {ChatState}
     */
    live() {
        this.check();
        if (this.host.busy?.()) throw new NotNow('a reply is being written');
        const state = this.host.snapshot();
        if (state.messages.length === 0 && (this.base?.messages.length ?? 0) > 0) throw new NotNow('the chat is loading');
        return state;
    }

    /** Find the Lorekeeper chat (or import this one once) and load what was last synced. */
    async bind() {
        const found = await this.api.findChat(this.clientKey);
        this.check();
        if (!found) {
            const live = copyState(this.live());
            const answer = await this.api.importChat({
                jsonl: toJsonl(live),
                clientKey: this.clientKey,
                title: this.title,
                idempotencyKey: newKey(),
            });
            this.check();
            this.chatId = answer.id;
            this.integrity = answer.integrity;
            this.writes = writesOf(answer);
            this.base = live;
            this.queue = [];
            await this.persist();
            return;
        }
        const stored = await this.saved.load();
        this.check();
        this.chatId = found.id;
        if (stored && stored.chatId === found.id) {
            this.base = stored.base;
            this.integrity = stored.integrity;
            this.writes = stored.writes ?? null;
            this.queue = stored.queue ?? [];
            if (stored.integrity !== found.integrity) {
                // Written since this device last synced: elsewhere, or by a queued write of ours whose answer was
                // lost. Send the queue again first (a write that landed answers as it did, by its Idempotency-Key;
                // one that did not meets a 409, which reconciles), so the merge starts from what Lorekeeper holds
                // and nothing is applied twice. Then read it back and merge.
                const conflicts = this.conflicts;
                try {
                    while (this.queue.length && this.conflicts === conflicts) await this.sendHead();
                } catch (error) {
                    if (!(error instanceof LorekeeperError) || error.offline) throw error;
                }
                if (this.conflicts === conflicts && this.integrity !== found.integrity) await this.reconcile(this.base);
            }
        } else {
            // Never synced here: read it back and merge.
            await this.reconcile(null);
        }
    }

    async persist() {
        if (this.chatId === null || this.base === null || this.integrity === null) return;
        /** @type {SyncRecord} */
        const record = { chatId: this.chatId, integrity: this.integrity, writes: this.writes, base: this.base, queue: this.queue };
        await this.saved.save(record);
    }

    /** What Lorekeeper will hold once the queue is sent. */
    planned() {
        if (!this.base) throw new Error('not bound');
        return applyWrites(this.base, this.queue.map((item) => item.write));
    }

    /** Something may have changed: sync soon (several changes in a row go together). */
    schedule(delayMs = 250) {
        if (this.closed || this.failed) return;
        delayMs = Math.max(delayMs, this.notBefore - Date.now());
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => {
            this.timer = null;
            this.flush().catch(() => {});
        }, delayMs);
    }

    /**
     * Send everything that differs, now. Resolves when Lorekeeper holds the live chat; rejects with a
     * LorekeeperError when it cannot (then a retry is scheduled).
     */
    async flush() {
        if (this.running) {
            this.again = true;
            return this.running;
        }
        this.running = (async () => {
            try {
                do {
                    this.again = false;
                    await this.syncOnce();
                } while (this.again && !this.closed);
            } finally {
                this.running = null;
            }
        })();
        return this.running;
    }

    async syncOnce() {
        if (this.closed || this.failed || this.chatId === null || !this.base) return;
        try {
            if (this.stale) await this.reconcile(this.base);
            let previous = '';
            let settled = false;
            let sent = false; // nothing planned or sent (the poll finding the chat as it was): nothing saved again
            for (let rounds = 0; rounds < MAX_ROUNDS && !this.closed; rounds++) {
                if (!this.queue.length) {
                    const writes = planWrites(/** @type {ChatState} */ (this.base), this.live());
                    settled = !writes.length;
                    if (settled) break;
                    // The same writes again right after they were acknowledged: something in the live chat does not
                    // survive as JSON. Stop rather than send them forever.
                    const planned = JSON.stringify(writes);
                    if (planned === previous) throw new Error('the live chat does not converge (a value JSON cannot carry?)');
                    previous = planned;
                    this.queue.push(...writes.map((write) => ({ write, key: newKey() })));
                    await this.persist();
                    this.check();
                }
                this.setStatus('pending', `${this.queue.length} change(s) to send`);
                const conflicts = this.conflicts;
                sent = true;
                await this.sendHead();
                this.check();
                if (this.conflicts !== conflicts) previous = ''; // merged: planning the same again is right
            }
            if (sent) await this.persist();
            if (this.closed) return;
            if (!settled) {
                // Every round met another device's write (a 409, merged, sent again): it writes as fast as this one.
                // Asking again at once would read the whole chat back every round, for ever: wait, longer each time.
                const seconds = Math.round(this.retryMs / 1000);
                this.setStatus('conflict', `Another device keeps changing this chat: trying again in ${seconds} s`);
                this.backOff();
                return;
            }
            this.retryMs = RETRY_MIN_MS;
            this.notBefore = 0;
            this.setStatus('synced', 'Synced');
        } catch (error) {
            if (error instanceof Superseded) return;
            if (error instanceof NotNow) {
                this.schedule(1000);
                return;
            }
            if (error instanceof MergeDeferred) {
                this.setStatus('conflict', 'Another device changed this chat: merging once the reply is done');
                this.schedule(1000);
                throw error;
            }
            if (!(error instanceof LorekeeperError)) {
                this.setStatus('error', `Sync stopped on an error: ${error instanceof Error ? error.message : error}`);
                console.error('[Lorekeeper] sync failed', error);
                throw error;
            }
            if (error.offline) {
                this.setStatus('offline', `Offline: ${this.queue.length} change(s) wait (${error.message})`);
                this.backOff(error.retryAfter);
                throw error;
            }
            if (error.isConflict) {
                // The chat changed between its read and a write sent over it (the whole chat, after a restore): it
                // is read back at the next sync, not sent over unseen.
                this.stale = true;
                this.setStatus('conflict', 'Another device changed this chat: merging…');
                this.backOff(); // growing, should it go on changing under every try
                throw error;
            }
            await this.refused(error);
            throw error;
        }
    }

    /**
     * Lorekeeper refused a write in a way no merge fixes. A missing chat or a refused token stops the sync (the panel
     * says why); anything else is mended once by sending the whole chat, which Lorekeeper keeps the old version of.
     * @param {LorekeeperError} error
     */
    async refused(error) {
        if (error.status === 401 || error.status === 403) {
            this.failed = true;
            this.setStatus('error', 'Lorekeeper refused the token: check it, then press Test connection.');
            return;
        }
        if (error.status === 404) {
            this.failed = true;
            await this.saved.forget();
            this.setStatus('error', 'This chat is gone from Lorekeeper: press Test connection to link it again.');
            return;
        }
        if (error.redirected) {
            // Sending the whole chat would be redirected too: what waits stays queued for a corrected address.
            this.failed = true;
            this.setStatus('error', `${error.message} Sync is stopped until the address is changed (then press Test connection).`);
            return;
        }
        this.setStatus('error', `Lorekeeper refused a change (${error.message}); sending the whole chat.`);
        try {
            await this.overwrite();
            this.setStatus('synced', 'Synced (the whole chat was sent again)');
        } catch (again) {
            if (again instanceof LorekeeperError && again.offline) throw again;
            this.failed = true;
            const reason = again instanceof Error ? again.message : String(again);
            this.setStatus('error', `Lorekeeper refused this chat (${reason}); sync is stopped until it changes.`);
        }
    }

    /**
     * Sync again after the pause, not before the server's Retry-After (seconds); the pause after that one is longer.
     * @param {number} [retryAfterSeconds]
     */
    backOff(retryAfterSeconds = 0) {
        this.notBefore = Date.now() + Math.max(this.retryMs, (retryAfterSeconds || 0) * 1000);
        this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
        this.schedule();
    }

    async sendHead() {
        const head = this.queue[0];
        try {
            const answer = await this.api.send(/** @type {number} */ (this.chatId), head.write, /** @type {string} */ (this.integrity), head.key);
            this.base = applyWrite(/** @type {ChatState} */ (this.base), head.write);
            this.integrity = answer.integrity;
            this.writes = answer.writes ?? this.writes;
            this.queue.shift();
            // Not saved here: a write acknowledged but still in the stored queue is sent again with its
            // Idempotency-Key after a reload, and answers as it did.
        } catch (error) {
            if (error instanceof LorekeeperError && error.isConflict) {
                this.setStatus('conflict', 'Another device changed this chat: merging…');
                this.conflicts++;
                await this.reconcile(this.base);
                return;
            }
            throw error;
        }
    }

    /**
     * Read Lorekeeper's chat and merge it with the live one from their last common state (`common`; null when there
     * is none, and then the SillyTavern chat is taken as it is). Remote changes go into SillyTavern's chat; local ones
     * are planned on top of Lorekeeper's.
     * @param {ChatState|null} common
     */
    async reconcile(common) {
        const remote = await this.api.readChat(/** @type {number} */ (this.chatId));
        if (this.wentBack || (remote.writes !== null && this.writes !== null && remote.writes < this.writes)) {
            // Fewer writes than Lorekeeper answered this device before: its chat went back in time (its database was
            // restored from an older backup). What it lacks was never deleted: merged as deletions, SillyTavern's
            // file would lose every message written since the backup. This chat is sent over it instead (the import
            // keeps what it replaces as a revision there).
            if (!this.wentBack) this.restores++;
            // Until this chat is sent over it: a write landing on the old copy meanwhile (a 409 below) may bring its
            // count back up, and it is still the old copy.
            this.wentBack = true;
            this.setStatus('conflict', "Lorekeeper's copy of this chat is older than this browser's (restored from a backup?): sending this chat to it…");
            // Until it is sent, nothing queued goes onto the old copy: the next sync reads it back again first. Sent
            // over the copy just read only: a write landing meanwhile is a 409, and the next sync reads again.
            this.stale = true;
            await this.overwrite(remote.integrity);
            this.wentBack = false;
            this.stale = false;
            return;
        }
        const remoteState = { messages: remote.messages, metadata: remote.metadata ?? {} };
        // From here to the replace nothing waits: the chat read is the chat merged and replaced.
        const live = this.live();
        // No state in common known (this device never synced the chat): what both begin with is.
        const ancestor = common ?? commonStart(live, remoteState);
        const { merged, clean } = mergeStates(ancestor, live, remoteState);
        this.stale = false;
        if (!clean) {
            // Both changed the same messages: SillyTavern's chat wins and Lorekeeper keeps its version as a revision.
            this.integrity = remote.integrity;
            await this.overwrite();
            return;
        }
        if (!jsonEqual(merged.messages, live.messages) || !jsonEqual(merged.metadata, live.metadata)) {
            if (this.host.canReplace && !this.host.canReplace()) {
                this.stale = true;
                throw new MergeDeferred('the merge waits for the reply');
            }
            await this.host.replace(merged);
            this.check();
        }
        this.base = remoteState;
        this.integrity = remote.integrity;
        this.writes = remote.writes ?? this.writes;
        this.queue = [];
        await this.persist();
    }

    /**
     * Put the whole live chat over Lorekeeper's (its import's update mode keeps the replaced chat as a revision).
     * @param {string} [ifMatch] only over the chat of this integrity (else a 409)
     */
    async overwrite(ifMatch) {
        const live = copyState(this.live());
        const answer = await this.api.importChat({
            jsonl: toJsonl(live),
            clientKey: this.clientKey,
            chatId: /** @type {number} */ (this.chatId),
            ifMatch,
            idempotencyKey: newKey(),
        });
        this.check();
        this.base = live;
        this.integrity = answer.integrity;
        this.writes = writesOf(answer);
        this.queue = [];
        await this.persist();
    }

    /**
     * Lorekeeper wrote a user message's recall itself (the context build): keep `base` equal to what it holds.
     * @param {number} index
     * @param {any} record
     * @param {string} integrity the chat's integrity after that write
     */
    acknowledgeRecall(index, record, integrity) {
        if (!this.base || this.queue.length || !this.base.messages[index]) {
            this.stale = true;
            return;
        }
        const messages = [...this.base.messages];
        messages[index] = withRecall(messages[index], record);
        this.base = { ...this.base, messages };
        this.integrity = integrity;
        this.persist().catch(() => {});
    }

    /** Lorekeeper holds something this device could not place (a recall for a message it does not stand at): its
     * chat is read back and merged at the next sync. */
    readBack() {
        this.stale = true;
    }

    close() {
        this.closed = true;
        if (this.timer) clearTimeout(this.timer);
    }
}

/**
 * A message with `extra.bme_recall` set as Lorekeeper sets it: in the message and in its current swipe's entry.
 * @param {any} message
 * @param {any} record
 */
export function withRecall(message, record) {
    const copy = toJson(message);
    copy.extra = typeof copy.extra === 'object' && copy.extra !== null && !Array.isArray(copy.extra) ? copy.extra : {};
    const info = copy.swipe_info;
    const entry = Array.isArray(info) && Number.isInteger(copy.swipe_id) ? info[copy.swipe_id] : undefined;
    if (record === null) {
        delete copy.extra.bme_recall;
        if (entry && typeof entry.extra === 'object' && entry.extra) delete entry.extra.bme_recall;
        return copy;
    }
    copy.extra.bme_recall = toJson(record);
    if (entry && typeof entry === 'object') {
        if (typeof entry.extra !== 'object' || entry.extra === null || Array.isArray(entry.extra)) entry.extra = {};
        entry.extra.bme_recall = toJson(record);
    }
    return copy;
}
