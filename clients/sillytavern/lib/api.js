// Lorekeeper's REST API as the extension uses it. Every call names the server and token it was made with, so the
// panel can change them at any time. No cookies: the token goes in Authorization on a cross-origin request.

/** @typedef {import('./plan.js').Write} Write */

export class LorekeeperError extends Error {
    /**
     * @param {string} message
     * @param {{status?: number, body?: any, offline?: boolean, retryAfter?: number, timedOut?: boolean, redirected?: boolean}} [details]
     */
    constructor(message, { status = 0, body = null, offline = false, retryAfter = 0, timedOut = false, redirected = false } = {}) {
        super(message);
        this.status = status;
        this.body = body;
        this.offline = offline;
        this.retryAfter = retryAfter;
        /** No answer within the time-out (rather than a refused or blocked request). */
        this.timedOut = timedOut;
        /** The address answered with a redirect, which is not followed (see Api.request). */
        this.redirected = redirected;
    }

    /** A 409 saying the chat changed since the integrity sent (another device wrote first). */
    get isConflict() {
        return this.status === 409;
    }
}

/**
 * @typedef {object} RequestOptions
 * @property {any} [body]
 * @property {string} [contentType]
 * @property {string} [ifMatch]
 * @property {string} [idempotencyKey]
 * @property {number} [timeoutMs]
 */

/** The longest wait a Retry-After can ask of the extension: a date far ahead, or a clock behind the server's, never
 * stops the sync for longer. */
export const RETRY_AFTER_MAX_S = 600;

/**
 * A Retry-After as seconds from now: a number of seconds (as Lorekeeper sends it) or an HTTP date (as a proxy in
 * front of it may), at most RETRY_AFTER_MAX_S; 0 when absent, unreadable or past.
 * @param {string|null} value
 * @param {number} [now] ms since the epoch
 */
export function retryAfterSeconds(value, now = Date.now()) {
    const text = String(value ?? '').trim();
    if (!text) return 0;
    const at = /^\d+$/.test(text) ? now + Number(text) * 1000 : Date.parse(text);
    return Number.isNaN(at) ? 0 : Math.min(RETRY_AFTER_MAX_S, Math.max(0, Math.ceil((at - now) / 1000)));
}

export class Api {
    /**
     * @param {{serverUrl: string, token: string, fetch?: typeof fetch, timeoutMs?: number}} options
     */
    constructor({ serverUrl, token, fetch: fetchImpl, timeoutMs = 15000 }) {
        this.serverUrl = String(serverUrl || '').replace(/\/+$/, '');
        this.token = token || '';
        this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
        this.timeoutMs = timeoutMs;
        /** Bytes of request bodies sent, for the bench and the panel. */
        this.bytesSent = 0;
    }

    get configured() {
        return Boolean(this.serverUrl && this.token);
    }

    /**
     * @param {string} method
     * @param {string} path below /api/v1/
     * @param {RequestOptions} [options]
     * @returns {Promise<{status: number, body: any, etag: string|null}>}
     */
    async request(method, path, { body, contentType = 'application/json', ifMatch, idempotencyKey, timeoutMs } = {}) {
        /** @type {Record<string, string>} */
        const headers = { Authorization: `Bearer ${this.token}` };
        let payload;
        if (body !== undefined) {
            payload = typeof body === 'string' ? body : JSON.stringify(body);
            headers['Content-Type'] = contentType;
            this.bytesSent += new TextEncoder().encode(payload).length;
        }
        if (ifMatch) headers['If-Match'] = `"${ifMatch}"`;
        if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
        const controller = new AbortController();
        const timer = setTimeout(() => controller.abort(), timeoutMs ?? this.timeoutMs);
        let response;
        let text;
        try {
            response = await this.fetch(`${this.serverUrl}/api/v1/${path}`, {
                method,
                headers,
                body: payload,
                signal: controller.signal,
                credentials: 'omit',
                // A redirect is not followed: a POST answered 301 or 302 would come back a GET, its write silently
                // not made, and its answer read as the write's (an http:// address behind a proxy that sends
                // everything to https:// does that). The person is told to give the address it redirects to.
                redirect: 'manual',
            });
            text = await response.text(); // within the time-out too: a stalled body counts as no answer
        } catch (error) {
            const timedOut = controller.signal.aborted;
            throw new LorekeeperError(timedOut ? 'Lorekeeper did not answer in time.' : 'Lorekeeper is unreachable.', {
                offline: true,
                timedOut,
            });
        } finally {
            clearTimeout(timer);
        }
        let parsed = null;
        try {
            parsed = text ? JSON.parse(text) : null;
        } catch {
            parsed = text;
        }
        if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
            const to = response.headers.get('Location'); // a browser does not show it
            throw new LorekeeperError(
                `${this.serverUrl} answered with a redirect${to ? ` to ${to}` : ''}, which the extension does not follow: give the address Lorekeeper is served at (https://, if a proxy in front of it redirects there).`,
                { status: response.status, redirected: true },
            );
        }
        if (!response.ok) {
            const retryAfter = retryAfterSeconds(response.headers.get('Retry-After'));
            const message = (parsed && (parsed.message || parsed.detail)) || `Lorekeeper answered ${response.status}.`;
            // Busy or briefly down: wait and send the same request again, as when unreachable.
            const offline = response.status === 429 || response.status === 502 || response.status === 503 || response.status === 504;
            throw new LorekeeperError(message, { status: response.status, body: parsed, offline, retryAfter });
        }
        return { status: response.status, body: parsed, etag: response.headers.get('ETag') };
    }

    /** The panel's "Test connection": one authenticated read. */
    async ping() {
        return (await this.request('GET', 'chats/?limit=1')).body;
    }

    /** @param {string} clientKey @returns {Promise<any|null>} the chat summary, or null */
    async findChat(clientKey) {
        const { body } = await this.request('GET', `chats/?client_key=${encodeURIComponent(clientKey)}`);
        return body.results?.[0] ?? null;
    }

    /**
     * The World Info books the chat uses, as SillyTavern has them (`[{name, use, data, characters?}]`), and, when
     * given, the names of SillyTavern's books on no global list and the chat's characters' Additional Lorebooks.
     * @param {number} chatId
     * @param {{name: string, use: string, data: any, characters?: string[]}[]} books
     * @param {string[]} [notGlobal]
     * @param {{character: string, books: string[]}[]} [extraBooks]
     */
    async putChatBooks(chatId, books, notGlobal, extraBooks) {
        const body = { books, ...(notGlobal ? { not_global: notGlobal } : {}), ...(extraBooks ? { extra_books: extraBooks } : {}) };
        return (await this.request('POST', `chats/${chatId}/lorebooks`, { body, timeoutMs: Math.max(this.timeoutMs, 60000) })).body;
    }

    /** @param {number} chatId */
    async getChat(chatId) {
        return (await this.request('GET', `chats/${chatId}/`)).body;
    }

    /**
     * Import a chat file, or (with `chatId`) put a file over an existing chat, keeping what it replaces as a
     * revision on the server.
     * @param {{jsonl: string, clientKey: string, title?: string, chatId?: number, ifMatch?: string, idempotencyKey?: string}} options
     */
    async importChat({ jsonl, clientKey, title, chatId, ifMatch, idempotencyKey }) {
        const query = new URLSearchParams({ client_key: clientKey });
        if (title) query.set('title', title);
        if (chatId) query.set('chat', String(chatId));
        const answer = await this.request('POST', `chats/import?${query}`, {
            body: jsonl,
            contentType: 'application/jsonl',
            ifMatch,
            idempotencyKey,
            timeoutMs: Math.max(this.timeoutMs, 120000),
        });
        return answer.body;
    }

    /**
     * Send one planned write. Answers the chat's new integrity, and its count of writes (`writes`: only grows;
     * null from a server older than it).
     * @param {number} chatId
     * @param {Write} write
     * @param {string} integrity
     * @param {string} idempotencyKey
     * @returns {Promise<{integrity: string, writes: number|null}>}
     */
    async send(chatId, write, integrity, idempotencyKey) {
        const options = { ifMatch: integrity, idempotencyKey };
        let answer;
        if (write.kind === 'append') {
            answer = await this.request('POST', `chats/${chatId}/append?mirror=true`, { ...options, body: { messages: write.messages } });
        } else if (write.kind === 'patch') {
            answer = await this.request('POST', `chats/${chatId}/patch?mirror=true`, { ...options, body: { operations: write.operations } });
        } else if (write.merge) {
            answer = await this.request('PATCH', `chats/${chatId}/metadata?mirror=true`, {
                ...options,
                body: write.merge,
                contentType: 'application/merge-patch+json',
            });
        } else {
            answer = await this.request('PATCH', `chats/${chatId}/metadata?mirror=true`, {
                ...options,
                body: write.operations,
                contentType: 'application/json-patch+json',
            });
        }
        return { integrity: answer.body.integrity, writes: writesOf(answer.body) };
    }

    /**
     * The whole chat as Lorekeeper holds it, read a page at a time; pages read while another write landed are
     * read again.
     * @param {number} chatId
     * @returns {Promise<{messages: any[], metadata: Record<string, any>, integrity: string, writes: number|null}>}
     */
    async readChat(chatId) {
        for (let attempt = 0; attempt < 5; attempt++) {
            const messages = [];
            let integrity = null;
            let writes = null;
            let metadata = {};
            let from = 0;
            let consistent = true;
            for (;;) {
                const { body } = await this.request('GET', `chats/${chatId}/delta?from_index=${from}&limit=500`);
                if (integrity === null) {
                    integrity = body.integrity;
                    writes = writesOf(body);
                } else if (integrity !== body.integrity) {
                    consistent = false;
                    break;
                }
                metadata = body.chat_metadata;
                const page = Array.isArray(body.messages) ? body.messages : [];
                if (page.length > 500) throw new LorekeeperError('Lorekeeper answered a page of more messages than asked.');
                for (const message of page) messages.push(message); // not push(...page): a spread has a size limit
                if (!body.has_more) break;
                // A page that does not move on would be asked for again for ever.
                if (!Number.isInteger(body.next_index) || body.next_index <= from) {
                    throw new LorekeeperError('Lorekeeper answered a page of the chat that does not move on.');
                }
                from = body.next_index;
            }
            if (consistent) return { messages, metadata, integrity, writes };
        }
        throw new LorekeeperError('The chat kept changing while it was read.', { status: 409 });
    }

    /**
     * @param {number} chatId
     * @param {{message?: string, character?: string}} body
     * @param {number} timeoutMs
     */
    async context(chatId, body, timeoutMs) {
        // mirror: the extension writes the kept recall into SillyTavern's chat too, so exports keep its slug.
        return (await this.request('POST', `chats/${chatId}/context?mirror=true`, { body, timeoutMs })).body;
    }

    /** The last context built for the chat (its macros, for a page just loaded). @param {number} chatId */
    async lastContext(chatId) {
        return (await this.request('GET', `chats/${chatId}/context`)).body;
    }

    /** @param {number} chatId @param {number} index */
    async recall(chatId, index) {
        return (await this.request('GET', `chats/${chatId}/messages/${index}/recall`)).body;
    }

    /** @param {number} chatId @param {number} index @param {string} text @param {string} integrity */
    async recallEdit(chatId, index, text, integrity) {
        const options = { body: { injection_text: text }, ifMatch: integrity, idempotencyKey: newKey() };
        return (await this.request('PATCH', `chats/${chatId}/messages/${index}/recall?mirror=true`, options)).body;
    }

    /** @param {number} chatId @param {number} index @param {string} integrity */
    async recallDelete(chatId, index, integrity) {
        const options = { ifMatch: integrity, idempotencyKey: newKey() };
        return (await this.request('DELETE', `chats/${chatId}/messages/${index}/recall?mirror=true`, options)).body;
    }

    /** @param {number} chatId @param {number} index @param {string} integrity */
    async recallRerun(chatId, index, integrity) {
        const options = { ifMatch: integrity, idempotencyKey: newKey(), timeoutMs: Math.max(this.timeoutMs, 60000) };
        return (await this.request('POST', `chats/${chatId}/messages/${index}/recall/rerun?mirror=true`, options)).body;
    }

    /**
     * The chat's active memories, not counting its indexed turns (kind `message`, shown as indexing progress).
     * @param {number} chatId
     */
    async memoryCount(chatId) {
        const { body } = await this.request('GET', `memories/count?chat=${chatId}&status=active`);
        return body.count - (body.by_kind?.message ?? 0);
    }

    /** @param {number} chatId */
    async pipeline(chatId) {
        return (await this.request('GET', `chats/${chatId}/pipeline`)).body;
    }
}

/** A fresh Idempotency-Key. */
export function newKey() {
    if (globalThis.crypto?.randomUUID) return globalThis.crypto.randomUUID();
    return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`;
}

/**
 * A chat's count of writes as an answer gives it (`writes`), or null when the answer has none (a server from before
 * it).
 * @param {any} body
 * @returns {number|null}
 */
export function writesOf(body) {
    return Number.isSafeInteger(body?.writes) && body.writes >= 0 ? body.writes : null;
}
