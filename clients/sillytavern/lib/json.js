// JSON values as Lorekeeper stores them: deep equality, copies, RFC 6901 pointers and RFC 6902 / RFC 7386 patches.
// Pure functions, no SillyTavern: the Node tests load this module as it is.

/** @typedef {null|boolean|number|string|JsonValue[]|{[key: string]: JsonValue}} JsonValue */
/** @typedef {{op: string, path: string, value?: JsonValue, from?: string}} PatchOperation */

/** @param {unknown} value @returns {value is Record<string, any>} */
export function isObject(value) {
    return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A message or metadata object as JSON would carry it: `undefined` and functions dropped, as SillyTavern's own
 * save does (JSON.stringify).
 * @template T
 * @param {T} value
 * @returns {T}
 */
export function toJson(value) {
    return value === undefined ? value : JSON.parse(JSON.stringify(value));
}

/**
 * A value as JSON.stringify writes it, one level deep: SillyTavern keeps some fields of its live chat as Date
 * objects (a reply's `gen_started`) that its file, and Lorekeeper, hold as ISO strings.
 * @param {any} value
 */
export function plain(value) {
    if (value !== null && typeof value === 'object' && typeof value.toJSON === 'function') return value.toJSON();
    if (typeof value === 'number' && !Number.isFinite(value)) return null;
    return value;
}

/**
 * Deep equality of JSON values (as JSON.stringify would write them); object key order does not matter (the server
 * answers in its own order).
 * @param {any} a
 * @param {any} b
 * @returns {boolean}
 */
export function jsonEqual(a, b) {
    if (a === b) return true; // the same object, string or number: nothing to look into
    a = plain(a);
    b = plain(b);
    if (a === b) return true;
    if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
    if (Array.isArray(a)) {
        if (!Array.isArray(b) || a.length !== b.length) return false;
        for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
        return true;
    }
    if (Array.isArray(b)) return false;
    // Every message of a long chat is compared on each sync: no arrays made per object, as filter() would.
    const keys = Object.keys(a);
    let defined = 0;
    for (let i = 0; i < keys.length; i++) {
        const value = a[keys[i]];
        if (value === undefined) continue;
        defined++;
        if (!Object.prototype.hasOwnProperty.call(b, keys[i]) || !jsonEqual(value, b[keys[i]])) return false;
    }
    const others = Object.keys(b);
    for (let i = 0; i < others.length; i++) if (b[others[i]] !== undefined) defined--;
    return defined === 0;
}

/** @param {string|number} token */
export function escapeToken(token) {
    return String(token).replaceAll('~', '~0').replaceAll('/', '~1');
}

/** @param {string} pointer @returns {string[]} */
export function parsePointer(pointer) {
    if (pointer === '') return [];
    if (!pointer.startsWith('/')) throw new PatchError(`not a JSON pointer: ${pointer}`);
    return pointer.slice(1).split('/').map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

export class PatchError extends Error {}

/**
 * @param {any[]} array
 * @param {string} token
 * @param {boolean} allowEnd
 */
function arrayIndex(array, token, allowEnd) {
    if (token === '-' && allowEnd) return array.length;
    if (!/^(0|[1-9][0-9]*)$/.test(token)) throw new PatchError(`bad array index ${token}`);
    const index = Number(token);
    if (index > array.length || (index === array.length && !allowEnd)) throw new PatchError(`index ${token} out of range`);
    return index;
}

/** @param {any} doc @param {string[]} tokens */
function getAt(doc, tokens) {
    let node = doc;
    for (const token of tokens) {
        if (Array.isArray(node)) node = node[arrayIndex(node, token, false)];
        else if (isObject(node) && Object.prototype.hasOwnProperty.call(node, token)) node = node[token];
        else throw new PatchError(`no value at /${tokens.join('/')}`);
    }
    return node;
}

/**
 * Apply an RFC 6902 patch. The document is changed in place along the paths the operations touch only; callers
 * that keep the old state pass a copy (`copyPath` copies just the parents of a path).
 * @param {any} doc
 * @param {PatchOperation[]} operations
 * @returns {any} the patched document
 */
export function applyPatch(doc, operations) {
    for (const op of operations) {
        const tokens = parsePointer(op.path);
        if (op.op === 'test') {
            if (!jsonEqual(getAt(doc, tokens), op.value)) throw new PatchError(`test failed at ${op.path}`);
            continue;
        }
        if (tokens.length === 0) {
            if (op.op === 'add' || op.op === 'replace') doc = toJson(op.value);
            else throw new PatchError(`cannot ${op.op} the whole document`);
            continue;
        }
        const parent = getAt(doc, tokens.slice(0, -1));
        const last = tokens[tokens.length - 1];
        if (op.op === 'add' || op.op === 'replace') {
            const value = toJson(op.value);
            if (Array.isArray(parent)) {
                const index = arrayIndex(parent, last, op.op === 'add');
                if (op.op === 'add') parent.splice(index, 0, value);
                else parent[index] = value;
            } else if (isObject(parent)) {
                if (op.op === 'replace' && !Object.prototype.hasOwnProperty.call(parent, last)) {
                    throw new PatchError(`no value at ${op.path}`);
                }
                parent[last] = value;
            } else throw new PatchError(`no container at ${op.path}`);
        } else if (op.op === 'remove') {
            if (Array.isArray(parent)) parent.splice(arrayIndex(parent, last, false), 1);
            else if (isObject(parent) && Object.prototype.hasOwnProperty.call(parent, last)) delete parent[last];
            else throw new PatchError(`no value at ${op.path}`);
        } else {
            throw new PatchError(`unsupported operation ${op.op}`);
        }
    }
    return doc;
}

/**
 * RFC 7386 merge patch from `before` to `after`, or null when none can say it (a null inside a changed object
 * value: a merge patch can only delete with null).
 * @param {Record<string, any>} before
 * @param {Record<string, any>} after
 * @returns {Record<string, any>|null}
 */
export function mergePatchBetween(before, after) {
    /** @type {Record<string, any>} */
    const patch = {};
    for (const key of Object.keys(before)) {
        if (!Object.prototype.hasOwnProperty.call(after, key) || after[key] === undefined) patch[key] = null;
    }
    for (const [key, value] of Object.entries(after)) {
        if (value === undefined) continue;
        const old = before[key];
        if (Object.prototype.hasOwnProperty.call(before, key) && jsonEqual(old, value)) continue;
        if (isObject(old) && isObject(value)) {
            const inner = mergePatchBetween(old, value);
            if (inner === null) return null;
            patch[key] = inner;
        } else {
            if (containsNull(value)) return null;
            patch[key] = toJson(value);
        }
    }
    return patch;
}

/** @param {any} value @returns {boolean} */
function containsNull(value) {
    if (value === null) return true;
    if (Array.isArray(value)) return false; // arrays are replaced whole: their nulls are kept
    if (isObject(value)) return Object.values(value).some(containsNull);
    return false;
}

/**
 * Apply an RFC 7386 merge patch (returns a new object; `target` is not changed).
 * @param {any} target
 * @param {any} patch
 */
export function applyMergePatch(target, patch) {
    if (!isObject(patch)) return toJson(patch);
    const result = isObject(target) ? { ...target } : {};
    for (const [key, value] of Object.entries(patch)) {
        if (value === null) delete result[key];
        else result[key] = applyMergePatch(result[key], value);
    }
    return result;
}
