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
