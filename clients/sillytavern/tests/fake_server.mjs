// An in-memory fake of the Lorekeeper endpoints the extension uses, with the server's semantics (see
// apps/chats/services/writes.py, apps/chats/services/patch.py, apps/common/jsonpatch.py, apps/common/idempotency.py and
// apps/chats/apis/chats.py): integrity + If-Match (409 {error: "integrity"}), Luker's append retry rule
// (docs/GLOSSARY.md), JSON Patch on the message array (all or nothing, a failed `test` answers 409, an `add` equal
// to the message already at its index is skipped), merge / JSON patches of chat_metadata, delta reads, the import's
// create-or-update (keeping what it replaces as a revision) and Idempotency-Key replays.
//
// It shares no code with lib/: a bug there must not hide itself here.

import { randomUUID } from 'node:crypto';

const OPERATIONS = ['add', 'remove', 'replace', 'move', 'copy', 'test'];
const MAX_PAGE = 500;
const MAX_APPEND_MESSAGES = 1000;
const MAX_PATCH_OPERATIONS = 10000;

class PatchInvalid extends Error {}
class PatchConflict extends Error {}

class HttpError extends Error {
    /** @param {number} status @param {any} body */
    constructor(status, body) {
        super(body?.message ?? `HTTP ${status}`);
        this.status = status;
        this.body = body;
    }
}

/** JSON equality as apps/common/jsonpatch.json_equal has it (key sets must match; order does not matter). */
export function sameJson(a, b) {
    if (a === b) return true;
    if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson(a[k], b[k]));
}

/** A write: a new integrity, and one more write counted (Chat.writes, which only grows). */
function touch(chat) {
    chat.integrity = randomUUID();
    chat.writes += 1;
}

const copy = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

function parsePointer(pointer) {
    if (typeof pointer !== 'string') throw new PatchInvalid('a JSON pointer must be a string');
    if (pointer === '') return [];
    if (!pointer.startsWith('/')) throw new PatchInvalid(`JSON pointer ${pointer} must start with '/'`);
    const tokens = pointer.slice(1).split('/');
    for (const t of tokens) if (t.replaceAll('~0', '').replaceAll('~1', '').includes('~')) throw new PatchInvalid('bad ~ escape');
    return tokens.map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function arrayIndex(token, length, allowEnd) {
    if (token === '-' && allowEnd) return length;
    if (!/^(0|[1-9][0-9]{0,17})$/.test(token)) throw new PatchConflict(`${token} is not an array index`);
    const index = Number(token);
    if (index > length || (index === length && !allowEnd)) throw new PatchConflict(`index ${index} out of range (length ${length})`);
    return index;
}

function child(node, token) {
    if (isObj(node)) {
        if (!own(node, token)) throw new PatchConflict(`no member ${token}`);
        return node[token];
    }
    if (Array.isArray(node)) return node[arrayIndex(token, node.length, false)];
    throw new PatchConflict(`cannot descend into a ${typeof node} with ${token}`);
}

function getAt(doc, tokens) {
    let node = doc;
    for (const t of tokens) node = child(node, t);
    return node;
}

function addAt(doc, tokens, value) {
    if (!tokens.length) return value;
    const parent = getAt(doc, tokens.slice(0, -1));
    const token = tokens[tokens.length - 1];
    if (isObj(parent)) parent[token] = value;
    else if (Array.isArray(parent)) parent.splice(arrayIndex(token, parent.length, true), 0, value);
    else throw new PatchConflict(`cannot add ${token} to a ${typeof parent}`);
    return doc;
}

function removeAt(doc, tokens) {
    if (!tokens.length) throw new PatchConflict('cannot remove the whole document');
    const parent = getAt(doc, tokens.slice(0, -1));
    const token = tokens[tokens.length - 1];
    if (isObj(parent)) {
        if (!own(parent, token)) throw new PatchConflict(`no member ${token} to remove`);
        delete parent[token];
    } else if (Array.isArray(parent)) parent.splice(arrayIndex(token, parent.length, false), 1);
    else throw new PatchConflict(`cannot remove ${token} from a ${typeof parent}`);
    return doc;
}

function validate(op) {
    if (!isObj(op)) throw new PatchInvalid('an operation must be a JSON object');
    if (!OPERATIONS.includes(op.op)) throw new PatchInvalid(`unknown op ${op.op}`);
    parsePointer(op.path);
    if (['add', 'replace', 'test'].includes(op.op) && !own(op, 'value')) throw new PatchInvalid(`'${op.op}' needs a 'value'`);
    if (op.op === 'move' || op.op === 'copy') parsePointer(op.from);
}

/** RFC 6902 on any document (chat_metadata), as apps/common/jsonpatch.apply_patch: on a copy, all or nothing. */
function applyJsonPatch(document, operations) {
    if (!Array.isArray(operations)) throw new PatchInvalid('a JSON Patch is a JSON array of operations');
    let doc = copy(document);
    for (const op of operations) {
        validate(op);
        const tokens = parsePointer(op.path);
        if (op.op === 'add') doc = addAt(doc, tokens, copy(op.value));
        else if (op.op === 'remove') doc = removeAt(doc, tokens);
        else if (op.op === 'replace') {
            getAt(doc, tokens);
            doc = addAt(tokens.length ? removeAt(doc, tokens) : doc, tokens, copy(op.value));
        } else if (op.op === 'test') {
            if (!sameJson(getAt(doc, tokens), op.value)) throw new PatchConflict(`test failed at ${op.path}`);
        } else {
            const source = parsePointer(op.from);
            const value = copy(getAt(doc, source));
            if (op.op === 'move') doc = removeAt(doc, source);
            doc = addAt(doc, tokens, value);
        }
    }
    return doc;
}

/** RFC 7386, as apps/common/jsonpatch.merge_patch. */
function mergePatch(target, patch) {
    if (!isObj(patch)) return copy(patch);
    const result = isObj(target) ? { ...target } : {};
    for (const [key, value] of Object.entries(patch)) {
        if (value === null) delete result[key];
        else result[key] = mergePatch(own(result, key) ? result[key] : undefined, value);
    }
    return result;
}

/** SillyTavern headers never carry message keys (apps/chats/jsonl.is_header). */
const isHeader = (obj) => !own(obj, 'mes') && !own(obj, 'is_user') && !own(obj, 'swipes');

function response(status, body, headers = {}) {
    const text = body === undefined ? '' : JSON.stringify(body);
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
    return {
        ok: status >= 200 && status < 300,
        status,
        headers: { get: (name) => lower[String(name).toLowerCase()] ?? null },
        text: async () => text,
        json: async () => JSON.parse(text),
    };
}

const conflict = (chat) =>
    new HttpError(409, {
        error: 'integrity',
        message: 'The chat was changed by another client since you read it; read it again and re-apply your change.',
        current_integrity: chat.integrity,
        total_messages: chat.messages.length,
    });

export class FakeLorekeeper {
    /** @param {{token?: string, origin?: string}} [options] */
    constructor({ token = 't', origin = 'http://lk.test' } = {}) {
        this.token = token;
        this.origin = origin;
        /** @type {Map<number, {id: number, title: string, clientKey: string|null, integrity: string, writes: number, hasHeader: boolean, header: any, messages: any[], metadata: Record<string, any>, revisions: any[], generations: Set<string>}>} */
        this.chats = new Map();
        this.nextId = 1;
        /** @type {Map<string, {fingerprint: string, status: number, body: any, headers: Record<string, string>}>} */
        this.idempotency = new Map();
        /** While true, fetch rejects as a browser's does when the server is unreachable. */
        this.offline = false;
        /** The next N writes are applied, but their answers are lost (fetch rejects after the write). */
        this.loseAnswers = 0;
        /** Request body bytes per path (no query), e.g. `chats/1/append`. */
        this.bytesByPath = {};
        this.bytesTotal = 0;
        /** @type {{method: string, path: string, query: Record<string, string>, bytes: number, status: number|null, replayed: boolean, body: any}[]} */
        this.log = [];
        this.fetch = this.fetch.bind(this);
    }

    // ----- test helpers -------------------------------------------------------------------------------------

    /** @param {number} chatId */
    chat(chatId) {
        const chat = this.chats.get(Number(chatId));
        if (!chat) throw new Error(`no chat ${chatId}`);
        return chat;
    }

    /** The chat as the delta endpoint would give it whole (a copy). */
    state(chatId) {
        const chat = this.chat(chatId);
        return { messages: copy(chat.messages), metadata: copy(chat.metadata) };
    }

    integrity(chatId) {
        return this.chat(chatId).integrity;
    }

    /**
     * Change the chat server-side, as another device (or Lorekeeper's own context build) would: `fn` gets a copy of
     * {messages, metadata} to change in place or to replace by returning one. Answers the new integrity.
     * @param {number} chatId
     * @param {(state: {messages: any[], metadata: Record<string, any>}) => any} fn
     */
    writeAsOtherDevice(chatId, fn) {
        const chat = this.chat(chatId);
        const state = { messages: copy(chat.messages), metadata: copy(chat.metadata) };
        const result = fn(state) ?? state;
        chat.messages = copy(result.messages);
        chat.metadata = copy(result.metadata ?? {});
        touch(chat);
        return chat.integrity;
    }

    /** The chat as a database backup holds it, for `restore`. @param {number} chatId */
    backup(chatId) {
        return copy(this.chat(chatId));
    }

    /**
     * Bring a chat back as a backup held it: its messages, metadata, integrity and count of writes, as restoring the
     * database does (nothing of what was written since is left).
     * @param {any} backup what `backup` answered
     */
    restore(backup) {
        const chat = this.chat(backup.id);
        Object.assign(chat, copy(backup), { generations: chat.generations });
    }

    /** Requests matching a method and a path (RegExp or a string the path must end with). */
    requests(method, path) {
        return this.log.filter(
            (r) =>
                (!method || r.method === method) &&
                (!path || (path instanceof RegExp ? path.test(r.path) : r.path.endsWith(path))),
        );
    }

    resetCounters() {
        this.bytesByPath = {};
        this.bytesTotal = 0;
        this.log = [];
    }

    // ----- fetch ----------------------------------------------------------------------------------------------

    /**
     * @param {string} url
     * @param {{method?: string, headers?: Record<string, string>, body?: string}} [init]
     */
    async fetch(url, init = {}) {
        await Promise.resolve(); // answer asynchronously, as a network would
        if (this.offline) throw new TypeError('fetch failed');
        const parsed = new URL(url);
        const prefix = '/api/v1/';
        const method = (init.method ?? 'GET').toUpperCase();
        const headers = Object.fromEntries(Object.entries(init.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v)]));
        const bodyText = init.body === undefined || init.body === null ? '' : String(init.body);
        const bytes = Buffer.byteLength(bodyText);
        const path = parsed.pathname.startsWith(prefix) ? parsed.pathname.slice(prefix.length) : parsed.pathname;
        const query = Object.fromEntries(parsed.searchParams.entries());
        const entry = { method, path, query, bytes, status: null, replayed: false, body: bodyText };
        this.log.push(entry);
        this.bytesByPath[path] = (this.bytesByPath[path] ?? 0) + bytes;
        this.bytesTotal += bytes;

        let answer;
        if (parsed.origin !== this.origin || !parsed.pathname.startsWith(prefix)) {
            answer = response(404, { message: 'Not found.' });
        } else if (headers.authorization !== `Bearer ${this.token}`) {
            answer = response(401, { detail: 'Invalid token.' });
        } else {
            const write = method !== 'GET';
            const key = (headers['idempotency-key'] ?? '').trim();
            if (write && key) {
                const fingerprint = JSON.stringify([method, parsed.pathname + parsed.search, bodyText, headers['if-match'] ?? null]);
                const record = this.idempotency.get(key);
                if (record) {
                    entry.replayed = true;
                    answer =
                        record.fingerprint === fingerprint
                            ? response(record.status, record.body, { ...record.headers, 'Idempotent-Replayed': 'true' })
                            : response(422, { error: 'idempotency_key_reused', message: 'This Idempotency-Key was already used for a different request.' });
                } else {
                    const { status, body, headers: out } = this.handle(method, path, query, headers, bodyText);
                    if (status >= 200 && status < 300) this.idempotency.set(key, { fingerprint, status, body, headers: out });
                    answer = response(status, body, out);
                }
            } else {
                const { status, body, headers: out } = this.handle(method, path, query, headers, bodyText);
                answer = response(status, body, out);
            }
        }
        entry.status = answer.status;
        if (method !== 'GET' && this.loseAnswers > 0) {
            this.loseAnswers--;
            entry.lost = true;
            throw new TypeError('fetch failed (the answer was lost)');
        }
        return answer;
    }

    /** @returns {{status: number, body: any, headers: Record<string, string>}} */
    handle(method, path, query, headers, bodyText) {
        try {
            return this.route(method, path, query, headers, bodyText);
        } catch (error) {
            if (error instanceof HttpError) return { status: error.status, body: error.body, headers: {} };
            throw error;
        }
    }

    route(method, path, query, headers, bodyText) {
        if (path === 'chats/' && method === 'GET') return this.list(query);
        if (path === 'chats/import' && method === 'POST') return this.importChat(query, headers, bodyText);
        const match = /^chats\/(\d+)\/(append|patch|metadata|delta)?$/.exec(path);
        if (!match) throw new HttpError(404, { message: 'Not found.' });
        const chat = this.chats.get(Number(match[1]));
        if (!chat) throw new HttpError(404, { message: 'Not found.' });
        const action = match[2] ?? '';
        if (action === '' && method === 'GET') return this.ok(chat, this.detail(chat));
        if (action === 'append' && method === 'POST') return this.append(chat, headers, bodyText);
        if (action === 'patch' && method === 'POST') return this.patch(chat, headers, bodyText);
        if (action === 'metadata' && method === 'PATCH') return this.metadata(chat, headers, bodyText);
        if (action === 'metadata' && method === 'GET') return this.ok(chat, { chat_metadata: copy(chat.metadata), ...this.chatState(chat) });
        if (action === 'delta' && method === 'GET') return this.delta(chat, query);
        throw new HttpError(405, { message: `Method "${method}" not allowed.` });
    }

    ok(chat, body, status = 200) {
        return { status, body, headers: { ETag: `"${chat.integrity}"` } };
    }

    chatState(chat) {
        return { integrity: chat.integrity, total_messages: chat.messages.length, writes: chat.writes };
    }

    summary(chat) {
        return {
            id: chat.id,
            title: chat.title,
            characters: [],
            user_name: chat.header?.user_name ?? '',
            character_name: chat.header?.character_name ?? '',
            total_messages: chat.messages.length,
            integrity: chat.integrity,
            writes: chat.writes,
            client_key: chat.clientKey,
            created_at: '2025-01-01T00:00:00Z',
            updated_at: '2025-01-01T00:00:00Z',
        };
    }

    detail(chat) {
        return { ...this.summary(chat), chat_metadata: copy(chat.metadata), has_header: chat.hasHeader };
    }

    list(query) {
        let chats = [...this.chats.values()];
        if (query.client_key !== undefined) chats = chats.filter((c) => c.clientKey === query.client_key);
        const size = Math.max(1, Number(query.page_size) || 50);
        return {
            status: 200,
            body: { count: chats.length, next: null, previous: null, results: chats.slice(0, size).map((c) => this.summary(c)) },
            headers: {},
        };
    }

    ifMatch(headers, body, required) {
        let raw = (headers['if-match'] ?? '').trim();
        if (raw) raw = raw.replace(/^W\//, '').replace(/^"|"$/g, '');
        else if (isObj(body) && body.integrity) raw = String(body.integrity);
        if (!raw) {
            if (required) throw new HttpError(428, { error: 'integrity_required', message: 'Send the integrity you last read.' });
            return null;
        }
        return raw;
    }

    parseJson(bodyText) {
        try {
            return JSON.parse(bodyText);
        } catch {
            throw new HttpError(400, { message: 'JSON parse error.' });
        }
    }

    importChat(query, headers, bodyText) {
        const lines = bodyText.split('\n').filter((line) => line.trim() !== '');
        if (!lines.length) throw new HttpError(400, { message: 'The file is empty: a SillyTavern chat has at least one line.' });
        const objects = lines.map((line, i) => {
            try {
                const obj = JSON.parse(line);
                if (!isObj(obj)) throw new Error('not an object');
                return obj;
            } catch {
                throw new HttpError(400, { message: `Line ${i + 1}: not a JSON object.` });
            }
        });
        const header = isHeader(objects[0]) ? objects[0] : null;
        const messages = header ? objects.slice(1) : objects;
        const integrity = this.ifMatch(headers, null, false);
        const clientKey = query.client_key ?? null;
        let chat = null;
        if (query.chat !== undefined) {
            chat = this.chats.get(Number(query.chat));
            if (!chat) throw new HttpError(404, { message: 'Not found.' });
        } else if (clientKey !== null) {
            chat = [...this.chats.values()].find((c) => c.clientKey === clientKey) ?? null;
        }
        if (!chat) {
            if (integrity !== null) throw new HttpError(400, { message: 'If-Match names a chat to update, but the import makes a new one.' });
            chat = {
                id: this.nextId++,
                title: query.title || 'chat',
                clientKey,
                integrity: randomUUID(),
                writes: 1,
                hasHeader: Boolean(header),
                header: copy(header),
                messages: copy(messages),
                metadata: copy(header?.chat_metadata ?? {}),
                revisions: [],
                generations: new Set(),
            };
            this.chats.set(chat.id, chat);
            return this.ok(chat, { id: chat.id, title: chat.title, total_messages: chat.messages.length, integrity: chat.integrity, writes: chat.writes, client_key: chat.clientKey, created: true }, 201);
        }
        if (integrity !== null && integrity !== chat.integrity) throw conflict(chat);
        if (clientKey !== null && clientKey !== chat.clientKey) {
            if ([...this.chats.values()].some((c) => c !== chat && c.clientKey === clientKey)) {
                throw new HttpError(409, { error: 'client_key_taken', message: 'Another chat has this client key.' });
            }
            chat.clientKey = clientKey;
        }
        if (query.title) chat.title = query.title;
        if (chat.messages.length || chat.hasHeader) {
            chat.revisions.push({ reason: 'import over the chat', integrity: chat.integrity, messages: copy(chat.messages), metadata: copy(chat.metadata) });
        }
        chat.hasHeader = Boolean(header);
        chat.header = copy(header);
        chat.messages = copy(messages);
        chat.metadata = copy(header?.chat_metadata ?? {});
        touch(chat);
        return this.ok(chat, { id: chat.id, title: chat.title, total_messages: chat.messages.length, integrity: chat.integrity, writes: chat.writes, client_key: chat.clientKey, created: false });
    }

    append(chat, headers, bodyText) {
        const body = this.parseJson(bodyText);
        if (!isObj(body) || !Array.isArray(body.messages)) throw new HttpError(400, { message: '`messages` must be a list.' });
        const messages = body.messages;
        if (messages.length > MAX_APPEND_MESSAGES) throw new HttpError(400, { message: 'Too many messages.' });
        messages.forEach((m, i) => {
            if (!isObj(m)) throw new HttpError(400, { message: `messages[${i}] is not a JSON object.` });
        });
        const integrity = this.ifMatch(headers, body, true);
        const generation = body.generation_id ?? null;
        const answer = (applied, skipped) => this.ok(chat, { appended: applied, skipped, ...this.chatState(chat) });
        if (generation && chat.generations.has(generation)) return answer(0, messages.length);
        if (chat.integrity !== integrity) {
            // A retry whose first answer was lost: the chat already ends with exactly these messages.
            const tail = chat.messages.slice(-messages.length);
            if (messages.length && tail.length === messages.length && tail.every((m, i) => sameJson(m, messages[i]))) {
                return answer(0, messages.length);
            }
            throw conflict(chat);
        }
        const last = chat.messages[chat.messages.length - 1];
        let skipped = 0;
        while (last !== undefined && skipped < messages.length && sameJson(messages[skipped], last)) skipped++;
        const fresh = messages.slice(skipped);
        if (generation) chat.generations.add(generation);
        if (fresh.length) {
            chat.messages.push(...copy(fresh));
            touch(chat);
        }
        return answer(fresh.length, skipped);
    }

    patch(chat, headers, bodyText) {
        const body = this.parseJson(bodyText);
        const operations = isObj(body) ? body.operations : undefined;
        if (!Array.isArray(operations) || !operations.length) {
            throw new HttpError(400, { message: '`operations` must be a non-empty JSON array.' });
        }
        if (operations.length > MAX_PATCH_OPERATIONS) throw new HttpError(400, { message: 'Too many operations.' });
        const integrity = this.ifMatch(headers, body, true);
        if (chat.integrity !== integrity) throw conflict(chat);
        // All or nothing: work on a copy of the array, copying a message before changing inside it.
        const messages = chat.messages.slice();
        const copied = new Set();
        const message = (index) => {
            if (!copied.has(messages[index])) {
                messages[index] = copy(messages[index]);
                copied.add(messages[index]);
            }
            return messages[index];
        };
        const asMessage = (value) => {
            if (!isObj(value)) throw new PatchInvalid('a message must be a JSON object');
            return copy(value);
        };
        let applied = 0;
        let skipped = 0;
        let changed = false;
        for (let i = 0; i < operations.length; i++) {
            const op = operations[i];
            try {
                validate(op);
                const tokens = parsePointer(op.path);
                if (!tokens.length) throw new PatchInvalid('operations address messages: /N, /N/field…, or /- to add at the end');
                const [first, ...rest] = tokens;
                if (op.op === 'add') {
                    if (!rest.length) {
                        const index = arrayIndex(first, messages.length, true);
                        if (first !== '-' && index < messages.length && sameJson(messages[index], op.value)) {
                            skipped++; // an add of the message already there: a retry, skipped
                            continue;
                        }
                        messages.splice(index, 0, asMessage(op.value));
                        copied.add(messages[index]);
                    } else {
                        addAt(message(arrayIndex(first, messages.length, false)), rest, copy(op.value));
                    }
                } else if (op.op === 'remove') {
                    const index = arrayIndex(first, messages.length, false);
                    if (!rest.length) messages.splice(index, 1);
                    else removeAt(message(index), rest);
                } else if (op.op === 'replace') {
                    const index = arrayIndex(first, messages.length, false);
                    if (!rest.length) {
                        messages[index] = asMessage(op.value);
                        copied.add(messages[index]);
                    } else {
                        getAt(messages[index], rest);
                        addAt(removeAt(message(index), rest), rest, copy(op.value));
                    }
                } else if (op.op === 'test') {
                    const index = arrayIndex(first, messages.length, false);
                    if (!sameJson(getAt(messages[index], rest), op.value)) throw new PatchConflict(`test failed at ${op.path}`);
                } else {
                    const source = parsePointer(op.from);
                    if (!source.length) throw new PatchInvalid("'from' must address a message or a field in one");
                    if (op.op === 'move' && tokens.length > source.length && source.every((t, k) => tokens[k] === t)) {
                        throw new PatchConflict('cannot move a value into one of its own children');
                    }
                    const value = copy(getAt(messages, source));
                    if (op.op === 'move') {
                        const index = arrayIndex(source[0], messages.length, false);
                        if (source.length === 1) messages.splice(index, 1);
                        else removeAt(message(index), source.slice(1));
                    }
                    if (!rest.length) {
                        const index = arrayIndex(first, messages.length, true);
                        messages.splice(index, 0, asMessage(value));
                        copied.add(messages[index]);
                    } else {
                        addAt(message(arrayIndex(first, messages.length, false)), rest, value);
                    }
                }
                applied++;
                changed = changed || op.op !== 'test';
            } catch (error) {
                if (error instanceof PatchConflict) {
                    throw new HttpError(409, { error: 'patch_conflict', message: `Operation ${i}: ${error.message}.`, operation: i });
                }
                if (error instanceof PatchInvalid) {
                    throw new HttpError(400, { error: 'patch_invalid', message: `Operation ${i}: ${error.message}.`, operation: i });
                }
                throw error;
            }
        }
        if (changed) {
            chat.messages = messages;
            touch(chat);
        }
        return this.ok(chat, { applied, skipped, ...this.chatState(chat) });
    }

    metadata(chat, headers, bodyText) {
        const patch = this.parseJson(bodyText);
        const integrity = this.ifMatch(headers, null, true); // the body is the patch: If-Match only
        if (chat.integrity !== integrity) throw conflict(chat);
        const media = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        const kind =
            media === 'application/merge-patch+json' ? 'merge' : media === 'application/json-patch+json' ? 'json' : isObj(patch) ? 'merge' : 'json';
        let patched;
        try {
            if (kind === 'merge') {
                if (!isObj(patch)) throw new PatchInvalid('a merge patch for chat_metadata must be a JSON object');
                patched = mergePatch(chat.metadata, patch);
            } else {
                patched = applyJsonPatch(chat.metadata, patch);
            }
            if (!isObj(patched)) throw new PatchInvalid('chat_metadata must stay a JSON object');
        } catch (error) {
            if (error instanceof PatchConflict) throw new HttpError(409, { error: 'patch_conflict', message: error.message });
            if (error instanceof PatchInvalid) throw new HttpError(400, { error: 'patch_invalid', message: error.message });
            throw error;
        }
        chat.metadata = copy(patched);
        touch(chat); // chat_update always touches
        return this.ok(chat, { chat_metadata: copy(chat.metadata), ...this.chatState(chat) });
    }

    delta(chat, query) {
        const from = query.from_index === undefined ? 0 : Number(query.from_index);
        const limit = query.limit === undefined ? 100 : Number(query.limit);
        if (!Number.isInteger(from) || from < 0) throw new HttpError(400, { message: 'from_index must be >= 0.' });
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new HttpError(400, { message: `limit must be 1..${MAX_PAGE}.` });
        const messages = copy(chat.messages.slice(from, from + limit));
        const next = from + messages.length;
        const hasMore = next < chat.messages.length;
        return this.ok(chat, {
            messages,
            chat_metadata: copy(chat.metadata),
            from_index: from,
            next_index: hasMore ? next : null,
            has_more: hasMore,
            ...this.chatState(chat),
        });
    }
}
