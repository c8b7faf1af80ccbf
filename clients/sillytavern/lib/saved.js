// A chat's sync record as it is kept in the store: a head (the chat's id, its integrity, the queue, the metadata
// and a stamp for each page) and the last synced messages in pages of PAGE. A save writes the head and only the pages
// whose messages changed since the last save, all in one transaction of the store: sending one message in a
// 5,000-message chat writes one page, not the whole chat (which cost two serialisations of megabytes per send).
// The messages of the synced state are never changed in place (plan.js copies on write), so a page is unchanged
// when it holds the same message objects. A head whose pages do not all carry its stamps (a save cut short, another
// tab) is not trusted: loading answers nothing, and the sync reads the chat back and merges, as on a new device.

/** @typedef {import('./store.js').Store} Store */
/** @typedef {import('./store.js').SyncRecord} SyncRecord */

export const PAGE = 250;

/** @param {string} clientKey @param {number} n */
export function pageKey(clientKey, n) {
    return `${clientKey}\u0000${n}`; // no file name, hence no client key, holds a NUL
}

function newStamp() {
    return globalThis.crypto?.randomUUID?.() ?? `${Date.now()}-${Math.random()}`;
}

export class SavedChat {
    /** @param {Store} store @param {string} clientKey */
    constructor(store, clientKey) {
        this.store = store;
        this.clientKey = clientKey;
        /** What each stored page holds, as last saved or loaded here: its stamp and its messages. @type {{stamp: string, messages: any[]}[]} */
        this.pages = [];
    }

    /** The record last saved, or undefined when there is none or it cannot be trusted. @returns {Promise<SyncRecord|undefined>} */
    async load() {
        const head = await this.store.get(this.clientKey);
        if (!head) return undefined;
        if (head.base) return head; // saved whole, before pages: rewritten in pages at the next save
        const pages = [];
        const messages = [];
        for (const [n, stamp] of (head.pages ?? []).entries()) {
            const page = await this.store.get(pageKey(this.clientKey, n));
            if (!page || page.stamp !== stamp) return undefined;
            pages.push({ stamp, messages: page.messages });
            messages.push(...page.messages);
        }
        this.pages = pages;
        return { chatId: head.chatId, integrity: head.integrity, writes: head.writes ?? null, queue: head.queue ?? [], base: { messages, metadata: head.metadata ?? {} } };
    }

    /** @param {SyncRecord} record */
    async save(record) {
        const messages = record.base.messages;
        /** @type {[string, any][]} */
        const puts = [];
        const before = this.pages;
        const pages = [];
        for (let n = 0; n * PAGE < messages.length; n++) {
            const held = messages.slice(n * PAGE, (n + 1) * PAGE);
            const old = before[n];
            if (old && old.messages.length === held.length && old.messages.every((message, i) => message === held[i])) {
                pages.push(old);
            } else {
                const page = { stamp: newStamp(), messages: held };
                puts.push([pageKey(this.clientKey, n), page]);
                pages.push(page);
            }
        }
        const deletes = [];
        for (let n = pages.length; n < before.length; n++) deletes.push(pageKey(this.clientKey, n));
        const head = { chatId: record.chatId, integrity: record.integrity, writes: record.writes ?? null, queue: record.queue, metadata: record.base.metadata, pages: pages.map((page) => page.stamp) };
        puts.push([this.clientKey, head]);
        // Taken as saved at once, so that a save begun before this one ends compares with it; a save that fails
        // leaves nothing taken as saved, and the next writes every page.
        this.pages = pages;
        try {
            await this.store.write(puts, deletes);
        } catch (error) {
            this.pages = [];
            throw error;
        }
    }

    /** Remove the record and its pages. */
    async forget() {
        const head = await this.store.get(this.clientKey);
        const count = Math.max(head?.pages?.length ?? 0, this.pages.length);
        this.pages = [];
        await this.store.write([], [this.clientKey, ...Array.from({ length: count }, (_, n) => pageKey(this.clientKey, n))]);
    }
}
