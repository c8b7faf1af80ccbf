// The sync planner: what to send so that Lorekeeper's copy of a chat becomes the live one, and how to merge when
// another device wrote first. SillyTavern's events do not say everything (a deletion passes the new length; /hide
// and moving messages emit nothing), so the planner compares the live chat with the state it last synced.

import {
    applyMergePatch,
    applyPatch,
    escapeToken,
    isObject,
    jsonEqual,
    mergePatchBetween,
    parsePointer,
    plain,
    toJson,
} from './json.js';

/** @typedef {import('./json.js').PatchOperation} PatchOperation */
/** @typedef {{messages: any[], metadata: Record<string, any>}} ChatState */
/**
 * One write to Lorekeeper, in the order they must go:
 * - `append`: new messages at the end (`POST /chats/{id}/append`);
 * - `patch`: RFC 6902 operations on the message array, `test`-guarded (`POST /chats/{id}/patch`);
 * - `metadata`: a merge patch (or, when one cannot say it, JSON Patch) on chat_metadata (`PATCH …/metadata`).
 * @typedef {{kind: 'append', messages: any[]}
 *   | {kind: 'patch', operations: PatchOperation[]}
 *   | {kind: 'metadata', merge?: Record<string, any>, operations?: PatchOperation[]}} Write
 */

// How deep a message diff goes before it replaces a value whole: message → extra → a namespace → its keys.
const DIFF_DEPTH = 4;
export const MAX_APPEND = 200;
export const MAX_OPERATIONS = 1000;

/**
 * Where two message arrays differ: they share `before[0:start]` and their last `length - end` messages.
 * @param {any[]} before
 * @param {any[]} after
 * @returns {{start: number, beforeEnd: number, afterEnd: number}}
 */
export function changedRegion(before, after) {
    const shortest = Math.min(before.length, after.length);
    let start = 0;
    while (start < shortest && jsonEqual(before[start], after[start])) start++;
    let tail = 0;
    while (tail < shortest - start && jsonEqual(before[before.length - 1 - tail], after[after.length - 1 - tail])) {
        tail++;
    }
    return { start, beforeEnd: before.length - tail, afterEnd: after.length - tail };
}

/**
 * Operations that turn the value at `path` from `before` into `after`, descending into objects and growing arrays
 * so an edit sends the changed part only.
 * @param {string} path
 * @param {any} before
 * @param {any} after
 * @param {number} depth
 * @param {PatchOperation[]} out
 */
function valueOperations(path, before, after, depth, out) {
    before = plain(before);
    after = plain(after);
    if (jsonEqual(before, after)) return;
    if (depth > 0 && isObject(before) && isObject(after)) {
        // Own members only: `key in` would find "constructor" or "toString" on Object.prototype.
        for (const key of Object.keys(before)) {
            if (before[key] !== undefined && (!Object.hasOwn(after, key) || after[key] === undefined)) {
                out.push({ op: 'remove', path: `${path}/${escapeToken(key)}` });
            }
        }
        for (const [key, value] of Object.entries(after)) {
            if (value === undefined) continue;
            const child = `${path}/${escapeToken(key)}`;
            if (!Object.hasOwn(before, key) || before[key] === undefined) out.push({ op: 'add', path: child, value: toJson(value) });
            else valueOperations(child, before[key], value, depth - 1, out);
        }
        return;
    }
    if (depth > 0 && Array.isArray(before) && Array.isArray(after) && after.length >= before.length) {
        for (let i = 0; i < before.length; i++) valueOperations(`${path}/${i}`, before[i], after[i], depth - 1, out);
        for (let i = before.length; i < after.length; i++) out.push({ op: 'add', path: `${path}/-`, value: toJson(after[i]) });
        return;
    }
    out.push({ op: 'replace', path, value: toJson(after) });
}

/**
 * A `test` guarding a message about to change: a small field of the version it expects.
 * @param {number} index
 * @param {any} message
 * @returns {PatchOperation[]}
 */
function guard(index, message) {
    if (!isObject(message)) return [];
    for (const key of ['send_date', 'is_user', 'name']) {
        if (message[key] !== undefined) return [{ op: 'test', path: `/${index}/${key}`, value: toJson(message[key]) }];
    }
    return [];
}

/**
 * Where an append of `after[start:]` splits into writes of at most MAX_APPEND messages, none starting with a copy of
 * the message before it (Lorekeeper would drop it as a retry); null when a run of equal messages is too long for
 * that (then it goes as a patch).
 * @param {any[]} after
 * @param {number} start
 * @returns {[number, number][]|null}
 */
function appendParts(after, start) {
    /** @type {[number, number][]} */
    const parts = [];
    for (let from = start; from < after.length; ) {
        let to = Math.min(from + MAX_APPEND, after.length);
        while (to < after.length && to > from + 1 && jsonEqual(after[to], after[to - 1])) to--;
        if (to < after.length && jsonEqual(after[to], after[to - 1])) return null;
        parts.push([from, to]);
        from = to;
    }
    return parts;
}

/**
 * The writes that turn `base` (what Lorekeeper holds) into `live` (SillyTavern's chat). Applying them to `base`
 * with applyWrites gives `live` as JSON.
 * @param {ChatState} base
 * @param {ChatState} live
 * @returns {Write[]}
 */
export function planWrites(base, live) {
    /** @type {Write[]} */
    const writes = [];
    const before = base.messages;
    const after = live.messages;
    const region = changedRegion(before, after);
    const pureAppend = region.start === before.length && region.afterEnd > region.beforeEnd;
    // Lorekeeper drops an appended message equal to the last stored one (a retry, as Luker's append does,
    // docs/GLOSSARY.md): a message sent twice in a row goes as a patch.
    const looksLikeRetry = pureAppend && before.length > 0 && jsonEqual(before[before.length - 1], after[before.length]);
    const parts = pureAppend && !looksLikeRetry ? appendParts(after, before.length) : null;
    if (parts) {
        for (const [from, to] of parts) writes.push({ kind: 'append', messages: after.slice(from, to).map(toJson) });
    } else if (region.start < region.beforeEnd || region.start < region.afterEnd) {
        /** @type {PatchOperation[]} */
        const ops = [];
        const common = Math.min(region.beforeEnd - region.start, region.afterEnd - region.start);
        for (let k = 0; k < common; k++) {
            const i = region.start + k;
            /** @type {PatchOperation[]} */
            const changes = [];
            valueOperations(`/${i}`, before[i], after[i], isObject(before[i]) && isObject(after[i]) ? DIFF_DEPTH : 0, changes);
            if (changes.length) ops.push(...guard(i, before[i]), ...changes);
        }
        const at = region.start + common;
        for (let i = at; i < region.afterEnd; i++) {
            // Lorekeeper skips an `add` equal to the message already at its index (a retry): one equal to the
            // messages after it goes after them instead, which gives the same array.
            let shift = 0;
            while (region.afterEnd + shift < after.length && jsonEqual(after[i], after[region.afterEnd + shift])) shift++;
            ops.push({ op: 'add', path: `/${i + shift}`, value: toJson(after[i]) });
        }
        for (let i = at; i < region.beforeEnd; i++) ops.push(...guard(at, before[i]), { op: 'remove', path: `/${at}` });
        for (let i = 0; i < ops.length; i += MAX_OPERATIONS) {
            writes.push({ kind: 'patch', operations: ops.slice(i, i + MAX_OPERATIONS) });
        }
    }
    if (!jsonEqual(base.metadata, live.metadata)) {
        const merge = mergePatchBetween(base.metadata ?? {}, live.metadata ?? {});
        if (merge !== null) {
            writes.push({ kind: 'metadata', merge });
        } else {
            /** @type {PatchOperation[]} */
            const operations = [];
            valueOperations('', base.metadata ?? {}, live.metadata ?? {}, 1, operations);
            writes.push({ kind: 'metadata', operations });
        }
    }
    return writes;
}

/**
 * The state after one write, sharing what the write did not touch (the state given is not changed).
 * @param {ChatState} state
 * @param {Write} write
 * @returns {ChatState}
 */
export function applyWrite(state, write) {
    if (write.kind === 'append') return { ...state, messages: [...state.messages, ...write.messages.map(toJson)] };
    if (write.kind === 'metadata') {
        const metadata = write.merge
            ? applyMergePatch(state.metadata ?? {}, write.merge)
            : applyPatch(toJson(state.metadata ?? {}), write.operations ?? []);
        return { ...state, metadata };
    }
    // Copy on write: a message is copied before the first operation inside it changes it.
    const messages = [...state.messages];
    const copied = new WeakSet();
    for (const op of write.operations) {
        const tokens = parsePointer(op.path);
        if (tokens.length > 1 && op.op !== 'test') {
            const index = Number(tokens[0]);
            const message = messages[index];
            if (isObject(message) && !copied.has(message)) {
                messages[index] = toJson(message);
                copied.add(messages[index]);
            }
        }
        applyPatch(messages, [op]);
    }
    return { ...state, messages };
}

/**
 * @param {ChatState} state
 * @param {Write[]} writes
 */
export function applyWrites(state, writes) {
    return writes.reduce(applyWrite, state);
}

/**
 * Three-way merge of one object's keys: a key only one side changed takes that side's value; objects both sides
 * changed merge key by key; anything else both changed differently is a conflict, and the local value is kept.
 * @param {Record<string, any>} base
 * @param {Record<string, any>} local
 * @param {Record<string, any>} remote
 * @returns {{value: Record<string, any>, conflict: boolean}}
 */
function mergeKeys(base, local, remote) {
    // Own members only: `local.constructor` would be Object.prototype's function, not a missing key.
    const member = (/** @type {any} */ object, /** @type {string} */ key) =>
        isObject(object) && Object.hasOwn(object, key) ? object[key] : undefined;
    const value = toJson(remote ?? {});
    let conflict = false;
    for (const key of new Set([...Object.keys(base ?? {}), ...Object.keys(local ?? {})])) {
        const had = member(base, key);
        const mine = member(local, key);
        if (jsonEqual(had, mine)) continue;
        const theirs = member(remote, key);
        if (!jsonEqual(had, theirs) && !jsonEqual(mine, theirs)) {
            if (isObject(had) && isObject(mine) && isObject(theirs)) {
                const inner = mergeKeys(had, mine, theirs);
                value[key] = inner.value;
                conflict = conflict || inner.conflict;
                continue;
            }
            conflict = true;
        }
        if (mine === undefined) delete value[key];
        else value[key] = toJson(mine);
    }
    return { value, conflict };
}

/**
 * Merge what this device changed (`local`, from `base`) with what Lorekeeper got from elsewhere (`remote`, from
 * the same `base`). `clean` is false when both changed the same messages in ways that cannot both be kept; then
 * the merge is the local chat, and the caller keeps the remote one as a revision on the server.
 * @param {ChatState} base
 * @param {ChatState} local
 * @param {ChatState} remote
 * @returns {{merged: ChatState, clean: boolean}}
 */
export function mergeStates(base, local, remote) {
    const meta = mergeKeys(base.metadata, local.metadata, remote.metadata);
    const metadata = meta.value;
    const b = base.messages;
    const l = changedRegion(b, local.messages);
    const r = changedRegion(b, remote.messages);
    const localSame = l.start === l.beforeEnd && l.start === l.afterEnd;
    const remoteSame = r.start === r.beforeEnd && r.start === r.afterEnd;
    /** @param {any[]} messages */
    const done = (messages, clean = true) => ({ merged: { messages, metadata }, clean: clean && !meta.conflict });
    if (localSame) return done(remote.messages.map(toJson));
    if (remoteSame) return done(local.messages.map(toJson));
    // Both made the same change (a device that had already sent its change, and read it back): once, not twice.
    if (jsonEqual(local.messages, remote.messages)) return done(remote.messages.map(toJson));
    let localPart = local.messages.slice(l.start, l.afterEnd);
    const remotePart = remote.messages.slice(r.start, r.afterEnd);
    if (l.start === r.start && l.beforeEnd === l.start && r.beforeEnd === r.start) {
        // Both inserted at one place: what both inserted first is one change; the rest of each follows.
        let shared = 0;
        while (shared < localPart.length && shared < remotePart.length && jsonEqual(localPart[shared], remotePart[shared])) shared++;
        localPart = localPart.slice(shared);
    }
    // Remote first when both insert at one place: it reached Lorekeeper first.
    if (r.beforeEnd <= l.start) {
        return done(
            [...b.slice(0, r.start), ...remotePart, ...b.slice(r.beforeEnd, l.start), ...localPart, ...b.slice(l.beforeEnd)].map(
                toJson,
            ),
        );
    }
    if (l.beforeEnd <= r.start) {
        return done(
            [...b.slice(0, l.start), ...localPart, ...b.slice(l.beforeEnd, r.start), ...remotePart, ...b.slice(r.beforeEnd)].map(
                toJson,
            ),
        );
    }
    // Both edited messages in place (no side inserted or removed any): merge each message key by key.
    if (local.messages.length === b.length && remote.messages.length === b.length) {
        let clean = true;
        // A message both changed must be the same message on both sides, not another one moved into its place
        // (then its text and date both differ): else one side's edit would land on the wrong message.
        /** @param {any} was @param {any} now */
        const another = (was, now) => !isObject(now) || now.is_user !== was.is_user || (now.mes !== was.mes && now.send_date !== was.send_date);
        const messages = b.map((message, i) => {
            if (!isObject(message)) return toJson(local.messages[i]);
            const mine = local.messages[i];
            const theirs = remote.messages[i];
            if (!jsonEqual(message, mine) && !jsonEqual(message, theirs) && (another(message, mine) || another(message, theirs))) {
                clean = false;
            }
            const merged = mergeKeys(message, mine, theirs);
            clean = clean && !merged.conflict;
            return merged.value;
        });
        return done(messages, clean);
    }
    return done(local.messages.map(toJson), false);
}
