// The World Info books the open chat uses, sent to Lorekeeper as SillyTavern has them, so that Lorekeeper's own
// prompts (its web chat, its gateway) activate the same lore (docs/LOREBOOKS.md, "From SillyTavern"). A book is sent
// when the chat opens and when it changes, and only when it differs from what was last sent for that chat. A book
// taken off SillyTavern's global list is taken off Lorekeeper's (`sendNotGlobal`); a character's Additional
// Lorebooks are said whole (`sendExtraBooks`).

/** @typedef {{name: string, use: 'chat'|'character'|'global'|'extra', characters?: string[]}} Used */

/**
 * A character's Additional Lorebooks, as SillyTavern keeps them: in its World Info settings (`charLore`), by the
 * card's avatar file name without its extension, not in the card.
 * @param {any} character
 * @param {any[]} charLore
 * @returns {string[]}
 */
export function extraBooksOf(character, charLore) {
    const avatar = typeof character?.avatar === 'string' ? character.avatar.replace(/\.[^/.]+$/, '') : null;
    const held = Array.isArray(charLore) && avatar ? charLore.find((item) => item?.name === avatar) : null;
    const names = Array.isArray(held?.extraBooks) ? held.extraBooks : [];
    return [...new Set(names.filter((name) => typeof name === 'string' && name.trim()))];
}

/**
 * The books a chat uses, as SillyTavern gathers them: the books active in every chat, its chat lore
 * (`chat_metadata.world_info`), and its character's books (the card's `extensions.world`, then the character's
 * Additional Lorebooks; in a group, each member's). A book is named once, by the first of global, chat,
 * character, as SillyTavern reads it once (a character's book that is also global is read as global).
 * @param {{metadata?: any, character?: any, isGroup?: boolean, members?: any[], globalNames?: string[], charLore?: any[]}} open
 * @returns {Used[]}
 */
export function booksOfChat({ metadata, character, isGroup = false, members = [], globalNames = [], charLore = [] }) {
    /** @type {Used[]} */
    const used = [];
    /** @param {any} name @param {Used['use']} use */
    const add = (name, use) => {
        if (typeof name === 'string' && name.trim() && !used.some((book) => book.name === name)) used.push({ name, use });
    };
    for (const name of globalNames) add(name, 'global');
    add(metadata?.world_info, 'chat');
    if (!isGroup) add(character?.data?.extensions?.world, 'character');
    for (const member of isGroup ? members : []) {
        const name = member?.data?.extensions?.world;
        if (typeof member?.name !== 'string' || !member.name) continue;
        add(name, 'character');
        const book = used.find((held) => held.name === name && held.use === 'character');
        if (book) (book.characters ??= []).push(member.name); // whose book it is: a group's members by name
    }
    for (const owner of isGroup ? members : [character]) {
        for (const name of extraBooksOf(owner, charLore)) add(name, 'extra');
    }
    return used;
}

/**
 * Each of the chat's characters with its Additional Lorebooks, whole (an empty list says it has none).
 * @param {{character?: any, isGroup?: boolean, members?: any[], charLore?: any[]}} open
 * @returns {{character: string, books: string[]}[]}
 */
export function extraBooksOfChat({ character, isGroup = false, members = [], charLore = [] }) {
    const owners = (isGroup ? members : [character]).filter((owner) => typeof owner?.name === 'string' && owner.name);
    return owners.map((owner) => ({ character: owner.name, books: extraBooksOf(owner, charLore).slice(0, MAX_EXTRA_BOOKS) }));
}

/**
 * A short fingerprint of a book's JSON (FNV-1a over its text, with its length): what was sent is not sent again.
 * @param {any} data
 */
export function bookDigest(data) {
    const text = JSON.stringify(data) ?? '';
    let hash = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) {
        hash ^= text.charCodeAt(i);
        hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return `${text.length}:${hash.toString(16)}`;
}

/**
 * Send the chat's books that changed since they were last sent for it, one request each (a book may be large).
 * `sent` remembers, per server, chat, use and name, the digest last sent. A book SillyTavern cannot load is
 * skipped. A book Lorekeeper refuses (a 4xx: a regex key that does not compile, a book too large) is remembered
 * too, and sent again only once it changes; an outage throws (the next change or chat opening tries again).
 * @param {{api: {putChatBooks: (chatId: number, books: any[]) => Promise<any>, serverUrl: string}, chatId: number,
 *   used: Used[], load: (name: string) => Promise<any>, sent: Map<string, string>}} options
 * @returns {Promise<{sent: string[], refused: {name: string, reason: string}[]}>}
 */
export async function sendBooks({ api, chatId, used, load, sent }) {
    const names = [];
    const refused = [];
    for (const book of used) {
        const data = await load(book.name);
        if (!data || typeof data !== 'object' || !data.entries) continue;
        const key = `${api.serverUrl}|${chatId}|${book.use}|${book.name}`;
        const owners = book.characters ? { characters: book.characters } : {};
        const digest = bookDigest(data) + (book.characters ? `|${bookDigest(book.characters)}` : '');
        if (sent.get(key) === digest) continue;
        try {
            await api.putChatBooks(chatId, [{ name: book.name, use: book.use, data, ...owners }]);
            names.push(book.name);
        } catch (error) {
            const status = /** @type {any} */ (error)?.status ?? 0;
            if (!(status >= 400 && status < 500) || status === 409 || status === 429) throw error;
            refused.push({ name: book.name, reason: error instanceof Error ? error.message : String(error) });
        }
        sent.set(key, digest);
    }
    return { sent: names, refused };
}

export const MAX_NOT_GLOBAL = 5000; // names in one request, as Lorekeeper takes them
export const MAX_EXTRA_BOOKS = 50; // a character's Additional Lorebooks, as Lorekeeper keeps them
const MAX_NAME = 200;

/**
 * Tell Lorekeeper the Additional Lorebooks of the chat's characters when they changed since they were last said
 * for this chat (and once per chat each session, since they may have changed while the extension was not
 * running). A refusal (a 4xx) is remembered, so it is not repeated; an outage throws.
 * @param {{api: {putChatBooks: (chatId: number, books: any[], notGlobal?: string[], extraBooks?: any[]) => Promise<any>,
 *   serverUrl: string}, chatId: number, extras: {character: string, books: string[]}[], sent: Map<string, string>}} options
 * @returns {Promise<boolean>} whether they were said
 */
export async function sendExtraBooks({ api, chatId, extras, sent }) {
    const kept = extras.map(({ character, books }) => ({ character, books: books.filter((name) => name.length <= MAX_NAME) }));
    const key = `${api.serverUrl}|${chatId}|extra_books`;
    const digest = bookDigest(kept);
    if (!kept.length || sent.get(key) === digest) return false;
    try {
        await api.putChatBooks(chatId, [], undefined, kept);
    } catch (error) {
        const status = /** @type {any} */ (error)?.status ?? 0;
        if (!(status >= 400 && status < 500) || status === 409 || status === 429) throw error;
    }
    sent.set(key, digest);
    return true;
}

/**
 * Tell Lorekeeper which of SillyTavern's books are on no global list (every book not active in every chat), when
 * that changed since it was last said to this server: a book taken off SillyTavern's global list is then taken off
 * Lorekeeper's. A book it names is forgotten as sent globally, so that it is sent again if it goes back on the list.
 * A refusal (a 4xx) is remembered, so it is not repeated; an outage throws (the next change tries again).
 * @param {{api: {putChatBooks: (chatId: number, books: any[], notGlobal?: string[]) => Promise<any>, serverUrl: string},
 *   chatId: number, allNames: string[], globalNames: string[], sent: Map<string, string>}} options
 * @returns {Promise<string[]|null>} the names said, or null when nothing changed
 */
export async function sendNotGlobal({ api, chatId, allNames, globalNames, sent }) {
    const wanted = allNames.filter((name) => typeof name === 'string' && name.trim() && name.length <= MAX_NAME && !globalNames.includes(name));
    const names = [...new Set(wanted)].sort().slice(0, MAX_NOT_GLOBAL);
    const key = `${api.serverUrl}|not_global`;
    const digest = bookDigest(names);
    if (sent.get(key) === digest || (!names.length && !sent.has(key))) return null;
    try {
        await api.putChatBooks(chatId, [], names);
    } catch (error) {
        const status = /** @type {any} */ (error)?.status ?? 0;
        if (!(status >= 400 && status < 500) || status === 409 || status === 429) throw error;
    }
    sent.set(key, digest);
    const off = new Set(names.map((name) => `|global|${name}`));
    for (const sentKey of [...sent.keys()]) {
        const at = sentKey.indexOf('|global|');
        if (at >= 0 && sentKey.startsWith(`${api.serverUrl}|`) && off.has(sentKey.slice(at))) sent.delete(sentKey);
    }
    return names;
}
