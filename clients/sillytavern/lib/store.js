// Where a chat's sync state survives a reload or a closed tab: the state Lorekeeper holds (as last synced), its
// integrity, and the queue of writes not yet acknowledged. IndexedDB in the browser (a long chat is megabytes,
// past localStorage's few); a Map in Node's tests.

/**
 * @typedef {object} SyncRecord
 * @property {number} chatId
 * @property {string} integrity
 * @property {number|null} [writes] the chat's count of writes as Lorekeeper last answered it
 * @property {import('./plan.js').ChatState} base
 * @property {{write: import('./plan.js').Write, key: string}[]} queue
 */

/**
 * Keyed values (a chat's record is kept as a head and pages of messages: saved.js). `write` puts and deletes several
 * in one transaction: all of them or none.
 * @typedef {{get(key: string): Promise<any>, write(puts: [string, any][], deletes: string[]): Promise<void>}} Store
 */

/** @implements {Store} */
export class MemoryStore {
    constructor() {
        /** @type {Map<string, string>} */
        this.map = new Map();
    }

    /** @param {string} key */
    async get(key) {
        const raw = this.map.get(key);
        return raw === undefined ? undefined : JSON.parse(raw);
    }

    /** @param {[string, any][]} puts @param {string[]} deletes */
    async write(puts, deletes) {
        const encoded = puts.map(([key, value]) => [key, JSON.stringify(value)]);
        for (const key of deletes) this.map.delete(key);
        for (const [key, raw] of encoded) this.map.set(key, raw);
    }
}

/** @implements {Store} */
export class IndexedDbStore {
    /** @param {string} [name] */
    constructor(name = 'lorekeeper') {
        this.name = name;
        /** @type {Promise<IDBDatabase>|null} */
        this.opening = null;
    }

    /** @returns {Promise<IDBDatabase>} */
    open() {
        this.opening ??= new Promise((resolve, reject) => {
            const request = indexedDB.open(this.name, 1);
            request.onupgradeneeded = () => request.result.createObjectStore('chats');
            request.onsuccess = () => resolve(request.result);
            request.onerror = () => reject(request.error);
        });
        return this.opening;
    }

    /**
     * @param {IDBTransactionMode} mode
     * @param {(store: IDBObjectStore) => IDBRequest|undefined} action
     */
    async run(mode, action) {
        const db = await this.open();
        return new Promise((resolve, reject) => {
            const tx = db.transaction('chats', mode);
            const request = action(tx.objectStore('chats'));
            tx.oncomplete = () => resolve(request?.result);
            tx.onerror = () => reject(tx.error);
            tx.onabort = () => reject(tx.error);
        });
    }

    /** @param {string} key */
    async get(key) {
        return this.run('readonly', (store) => store.get(key));
    }

    /** @param {[string, any][]} puts @param {string[]} deletes */
    async write(puts, deletes) {
        await this.run('readwrite', (store) => {
            for (const key of deletes) store.delete(key);
            for (const [key, value] of puts) store.put(value, key);
            return undefined;
        });
    }
}
