// The extension's settings as SillyTavern keeps them: one object under `extensionSettings.lorekeeper`, which
// SillyTavern saves. Everyone (the panel, the sync, the interceptor) must hold that same object: a copy put in its
// place would leave the panel writing into an object nobody reads or saves.

/**
 * The one stored settings object of `module`, with any missing default filled in place.
 * @template {Record<string, any>} T
 * @param {Record<string, any>} all SillyTavern's `extensionSettings`
 * @param {string} module
 * @param {T} defaults
 * @returns {T}
 */
export function storedSettings(all, module, defaults) {
    const stored = all[module];
    if (!stored || typeof stored !== 'object' || Array.isArray(stored)) {
        all[module] = { ...defaults };
        return all[module];
    }
    for (const [key, value] of Object.entries(defaults)) {
        if (!(key in stored)) stored[key] = value;
    }
    return stored;
}

/** SillyTavern's welcome-page Assistant, when the person has not chosen another character for it. */
export const DEFAULT_ASSISTANT_AVATAR = 'default_Assistant.png';

/**
 * Why the open chat is not synced, in words for the status line; null when it is.
 * @param {{configured: boolean, urlProblem?: string, tokenProblem?: string, clientKey: string|null, avatar?: string|null, assistantAvatar?: string|null,
 *     sync: boolean, syncAssistant: boolean, inject: boolean}} state
 * @returns {string|null}
 */
export function notSyncedReason({ configured, urlProblem = '', tokenProblem = '', clientKey, avatar = null, assistantAvatar = null, sync, syncAssistant, inject }) {
    if (!configured) return 'Not connected: set the server URL and token.';
    if (urlProblem) return `Not connected: ${urlProblem}`;
    if (tokenProblem) return `Not connected: ${tokenProblem}`;
    if (!clientKey) return 'No chat open.';
    if (!sync) return inject ? 'Sync is off, so no memory is injected either (Lorekeeper needs the chat).' : 'Sync is off.';
    // The welcome page's Assistant is SillyTavern's scratch chat, not a story: kept out unless asked for.
    if (!syncAssistant && avatar && avatar === (assistantAvatar || DEFAULT_ASSISTANT_AVATAR)) {
        return "SillyTavern's Assistant chat is not synced (tick \"Sync SillyTavern's Assistant chat too\" to sync it).";
    }
    return null;
}
