// What the context answer asks SillyTavern to inject, checked before SillyTavern sees it. The slot texts are
// memories a model wrote from the chat, so a character card or a message can steer them: SillyTavern expands macros
// in extension prompts and in what registered macros return, and `{{setvar::…}}`, `{{setglobalvar::…}}`,
// `{{banned "…"}}` or `{{// …}}` in a memory would change the person's variables, banned words or prompt. Only
// `{{user}}` and `{{char}}` keep working (a memory may say "{{user}} gave Mira the lantern"); every other macro's
// braces are kept apart by a zero-width space, which the model does not see. And only Lorekeeper's own slots are
// set, where SillyTavern can put one: another extension's prompt is never overwritten.

// SillyTavern's extension_prompt_types (IN_PROMPT, IN_CHAT) and extension_prompt_roles (SYSTEM, USER, ASSISTANT).
const POSITIONS = new Set([0, 1]);
const ROLES = new Set([0, 1, 2]);
export const MAX_DEPTH = 100; // Lorekeeper's own bound on a slot's depth
// A brace another brace follows, unless they open {{user}} or {{char}}: a lookahead, so that in "{{{x}}}" each pair
// is found (a match of both braces would leave the second and third together).
const MACRO = /\{(?=\{(?!\s*(?:user|char)\s*\}\}))/gi;

/**
 * `text` with every macro but {{user}} and {{char}} made inert.
 * @param {unknown} text
 * @returns {string}
 */
export function inertMacros(text) {
    return typeof text === 'string' ? text.replace(MACRO, '{\u200B') : '';
}

/**
 * The context answer's `sillytavern` list as setExtensionPrompt arguments: only the slots of `keys`, each once,
 * with a position, depth and role SillyTavern has, never scanned by World Info, and its text's macros inert.
 * @param {unknown} listed
 * @param {readonly string[]} keys
 * @returns {{key: string, value: string, position: number, depth: number, scan: boolean, role: number}[]}
 */
export function extensionPrompts(listed, keys) {
    const prompts = new Map();
    for (const prompt of Array.isArray(listed) ? listed : []) {
        if (!prompt || typeof prompt !== 'object' || !keys.includes(prompt.key) || prompts.has(prompt.key)) continue;
        const depth = Number.isInteger(prompt.depth) ? Math.min(MAX_DEPTH, Math.max(0, prompt.depth)) : 0;
        prompts.set(prompt.key, {
            key: prompt.key,
            value: inertMacros(prompt.value),
            position: POSITIONS.has(prompt.position) ? prompt.position : 0,
            depth,
            scan: false,
            role: ROLES.has(prompt.role) ? prompt.role : 0,
        });
    }
    return [...prompts.values()];
}

/**
 * The answer's `macros` (`{{smartmemory-…}}` → text) with their texts' macros inert; only string values.
 * @param {unknown} macros
 * @returns {Record<string, string>}
 */
export function macroTexts(macros) {
    /** @type {Record<string, string>} */
    const kept = {};
    if (!macros || typeof macros !== 'object' || Array.isArray(macros)) return kept;
    for (const [name, text] of Object.entries(macros)) {
        if (typeof text === 'string') kept[name] = inertMacros(text);
    }
    return kept;
}
