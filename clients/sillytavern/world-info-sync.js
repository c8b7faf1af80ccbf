// The open chat's World Info, read from SillyTavern and sent to Lorekeeper (what to send, and how: lib/books.js).
// This file is the SillyTavern side: the page's World Info list, its World Info module's settings, the chat's
// characters and group.

import { booksOfChat, extraBooksOfChat, sendBooks, sendExtraBooks, sendNotGlobal } from './lib/books.js';

/** The names of the books active in every chat: SillyTavern's "Active World(s) for all chats" list. */
function globalBookNames() {
    return Array.from(document.querySelectorAll('#world_info option:checked'), (option) => option.textContent ?? '');
}

/** The names of every book SillyTavern has: the options of that list. */
function allBookNames() {
    return Array.from(document.querySelectorAll('#world_info option'), (option) => option.textContent ?? '');
}

/**
 * SillyTavern's per-character Additional Lorebooks (`world_info.charLore`): its World Info module's own settings,
 * which its extension context does not carry. Empty where that module cannot be loaded.
 * @returns {Promise<any[]>}
 */
async function charLore() {
    try {
        // The extension sits in scripts/extensions/third-party/<folder>/: the same URL SillyTavern loaded, so the
        // same module instance and the settings it holds now.
        const module = await import(new URL('../../../world-info.js', import.meta.url).href);
        return Array.isArray(module.world_info?.charLore) ? module.world_info.charLore : [];
    } catch (error) {
        console.warn('[Lorekeeper] Additional Lorebooks not read:', error instanceof Error ? error.message : error);
        return [];
    }
}

/**
 * A function that sends the open chat's World Info books to Lorekeeper where they changed, one run at a time (two
 * runs at once would send a new book twice); an outage waits for the next change, a refused book is said once.
 * It answers the run's promise.
 * @param {{
 *   ctx: () => any,
 *   api: () => import('./lib/api.js').Api,
 *   linked: () => {chatId: number|null}|null,
 *   syncing: () => boolean,
 * }} host SillyTavern's context, the API client, the open chat's link, and whether syncing is on
 * @returns {() => Promise<void>}
 */
export function bookSender({ ctx, api, linked, syncing }) {
    /** What was last sent of each book, per server, chat and use (lib/books.js). */
    const sent = new Map();
    let running = Promise.resolve();
    return function syncBooks() {
        running = running.then(async () => {
            const chatId = linked()?.chatId;
            if (!chatId || !syncing()) return;
            const c = ctx();
            const globalNames = globalBookNames();
            const members = c.groups?.find((/** @type {any} */ group) => group.id === c.groupId)?.members ?? [];
            const open = {
                character: c.groupId ? null : c.characters[c.characterId],
                isGroup: Boolean(c.groupId),
                members: c.groupId ? c.characters.filter((/** @type {any} */ character) => members.includes(character.avatar)) : [],
                charLore: await charLore(),
            };
            const used = booksOfChat({ metadata: c.chatMetadata, globalNames, ...open });
            try {
                const { refused } = await sendBooks({ api: api(), chatId, used, load: (name) => c.loadWorldInfo(name), sent });
                for (const book of refused) {
                    globalThis.toastr?.warning(`${book.reason} Lorekeeper's replies use the book as it had it.`, `Lorekeeper refused the World Info book ${book.name}`, {
                        escapeHtml: true, // the reason quotes the book (a key, a name): text, never HTML
                    });
                }
                await sendExtraBooks({ api: api(), chatId, extras: extraBooksOfChat(open), sent });
                await sendNotGlobal({ api: api(), chatId, allNames: allBookNames(), globalNames, sent });
            } catch (error) {
                console.warn('[Lorekeeper] World Info not sent:', error instanceof Error ? error.message : error);
            }
        });
        return running;
    };
}
