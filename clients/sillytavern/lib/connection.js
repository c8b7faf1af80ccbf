// The panel's "Test connection": what failed, from what a browser can tell apart. A refused connection and a CORS
// refusal look the same to a page (a TypeError with no detail), so a failed request is followed by an opaque
// `no-cors` probe of the same address: it succeeds when something answers there, which leaves CORS as the reason.

import { Api, LorekeeperError, RETRY_AFTER_MAX_S } from './api.js';

/** The server setting that lists the origins Lorekeeper's API answers (config/settings/base.py). */
export const CORS_VARIABLE = 'LOREKEEPER_CORS_ORIGINS';

/**
 * @typedef {'connected'|'no_url'|'bad_url'|'no_token'|'bad_token'|'mixed_content'|'unauthorized'|'forbidden'|'busy'|'answered'
 *     |'redirected'|'timeout'|'nothing_listening'|'cors'} OutcomeKind
 * @typedef {{kind: OutcomeKind, status?: number, detail?: string, retryAfter?: number}} Outcome
 */

/** The first wait before a chat is linked again when Lorekeeper did not answer, the longest, and the longest a
 * server's Retry-After is followed. */
export const LINK_RETRY_MIN_MS = 5000;
export const LINK_RETRY_MAX_MS = 60000;
const RETRY_AFTER_MAX_MS = RETRY_AFTER_MAX_S * 1000;

/**
 * How long to wait before linking the chat again, and the wait after that one: doubled each time Lorekeeper still
 * does not answer (at most LINK_RETRY_MAX_MS), never under its Retry-After (seconds), with up to a fifth more at
 * random, so that the browsers a server's restart left waiting do not all come back in the same second.
 * @param {number} previousMs the wait this one follows (LINK_RETRY_MIN_MS at first)
 * @param {number} [retryAfterSeconds]
 * @param {() => number} [random]
 * @returns {{waitMs: number, nextMs: number}}
 */
export function linkRetry(previousMs, retryAfterSeconds = 0, random = Math.random) {
    const base = Math.min(Math.max(Number(previousMs) || 0, LINK_RETRY_MIN_MS), LINK_RETRY_MAX_MS);
    const asked = Math.min(Math.max(Number(retryAfterSeconds) || 0, 0) * 1000, RETRY_AFTER_MAX_MS);
    return { waitMs: Math.round(Math.max(base, asked) * (1 + random() / 5)), nextMs: Math.min(base * 2, LINK_RETRY_MAX_MS) };
}

/** A name of this machine: localhost, 127.0.0.0/8 or ::1. @param {string} hostname */
export function isLoopback(hostname) {
    const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
    return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** The server URL as typed, parsed; null unless it is an http(s) URL. @param {string} text */
export function parseServerUrl(text) {
    const url = anyUrl(String(text || '').trim());
    // A login in the address (user:password@host): a browser refuses to send any request to it.
    return url && (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password ? url : null;
}

/** @param {string} text */
function anyUrl(text) {
    try {
        return new URL(text);
    } catch {
        return null;
    }
}

/**
 * The address without the login it holds (user:password@), or '' when it holds none.
 * @param {string} typed
 */
function withoutLogin(typed) {
    const url = anyUrl(typed.includes('://') ? typed : `http://${typed}`);
    if (!url || !(url.username || url.password) || !(url.protocol === 'http:' || url.protocol === 'https:')) return '';
    url.username = '';
    url.password = '';
    return url.href.replace(/\/$/, '');
}

/**
 * What is wrong with the server URL as typed, in words for the panel; empty when it is an http(s) URL or empty. An
 * address typed without its scheme (`127.0.0.1:8720`) would otherwise be read by the browser as a path on
 * SillyTavern's own server, or as a scheme of its own (`localhost:8720`).
 * @param {string} text
 */
export function serverUrlProblem(text) {
    const typed = String(text || '').trim();
    if (!typed || parseServerUrl(typed)) return '';
    const bare = withoutLogin(typed);
    if (bare) {
        return `the address holds a login (before its @), and a browser sends no request to such an address: give ${bare}. The API token is how Lorekeeper knows you.`;
    }
    if (!typed.includes('://') && parseServerUrl(`http://${typed}`)) {
        return `the address needs http:// or https:// before it: http://${typed} (or https://${typed}).`;
    }
    // Shown back without what stands before an @ (a login that did not parse, a password holding a / say).
    return `"${typed.replace(/^([a-z][a-z0-9+.-]*:\/\/)?[^@]*@/i, '$1…@')}" is not an http:// or https:// address.`;
}

/**
 * What is wrong with the token as pasted, in words for the panel; empty when it could be one (or is empty). A token is
 * plain ASCII; a character outside it (a zero-width space or a curly quote picked up with a copy) cannot be sent in a
 * header at all: the browser refuses the request before it leaves, which would otherwise read as a CORS refusal.
 * @param {string} text
 */
export function tokenProblem(text) {
    const chars = [...String(text || '').trim()]; // code points: an emoji is one character, as a person counts
    const at = chars.findIndex((char) => char < '!' || char > '~');
    if (at < 0) return '';
    const char = chars[at];
    const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    const shown = /\p{L}|\p{N}|\p{P}|\p{S}/u.test(char) ? ` "${char}"` : '';
    return `the token holds a character no token has, ${code}${shown} at character ${at + 1} of ${chars.length}: copy it again from Lorekeeper's API tokens page and paste it here.`;
}

/**
 * A warning when the token would cross the network unencrypted: plain http:// to a host that is not this machine.
 * Empty otherwise.
 * @param {string} serverUrl
 */
export function cleartextWarning(serverUrl) {
    const url = parseServerUrl(serverUrl);
    if (!url || url.protocol !== 'http:' || isLoopback(url.hostname)) return '';
    return `Warning: over plain http:// the token travels unencrypted to ${url.host}. Use an https:// address for a server on another machine.`;
}

/**
 * What to show for an outcome: `state` for the status line's colour and the message a person reads.
 * @param {Outcome} outcome
 * @param {{serverUrl: string, origin: string, timeoutMs?: number}} where
 * @returns {{state: 'synced'|'error', message: string}}
 */
export function describeConnection(outcome, { serverUrl, origin, timeoutMs = 0 }) {
    const url = String(serverUrl || '').trim().replace(/\/+$/, '');
    const detail = outcome.detail ? `: ${outcome.detail}` : '';
    /** @type {Record<OutcomeKind, string>} */
    const messages = {
        connected: `Connected to Lorekeeper at ${url}.`,
        no_url: 'Type the address of your Lorekeeper server, e.g. http://127.0.0.1:8720.',
        bad_url: `The server URL: ${serverUrlProblem(url)}`,
        no_token: 'Paste an API token: make one in Lorekeeper under API tokens.',
        bad_token: `The API token: ${outcome.detail ?? ''}`,
        mixed_content: `This page is served over https://, so the browser blocks plain http:// requests to ${url}. Give Lorekeeper an https:// address.`,
        unauthorized: `Lorekeeper at ${url} refused the token (401). Make a new one in Lorekeeper under API tokens and paste it here.`,
        forbidden: `Lorekeeper at ${url} refused this request (403)${detail}.`,
        busy: `Lorekeeper at ${url} is busy (${outcome.status}): try again in ${outcome.retryAfter ? `${outcome.retryAfter} s` : 'a few seconds'}.`,
        answered: `${url} answered ${outcome.status}${detail}. Is this the address of Lorekeeper?`,
        redirected: `${url} answers with a redirect, which the extension does not follow (a write would be lost on the way). Give the address Lorekeeper is served at: https://, if a proxy in front of it redirects there.`,
        timeout: `${url} did not answer within ${Math.round(timeoutMs / 100) / 10} s. Is Lorekeeper running there, and not overloaded?`,
        nothing_listening: `Nothing is listening at ${url}. Start Lorekeeper, or check the host and port.`,
        cors: `Something answers at ${url}, but the browser blocked the request (CORS): Lorekeeper does not allow this page's origin. Add ${origin} to ${CORS_VARIABLE} on the Lorekeeper server and restart it.${url.startsWith('http://') ? ' Or the address redirects (a proxy sending http:// to https://): then give the https:// address.' : ''}`,
    };
    const warning = outcome.kind === 'bad_url' || outcome.kind === 'no_url' ? '' : cleartextWarning(serverUrl);
    const message = [messages[outcome.kind] ?? `Connection failed${detail}.`, warning].filter(Boolean).join(' ');
    return { state: outcome.kind === 'connected' ? 'synced' : 'error', message };
}

/**
 * Try the server as the extension will use it (one authenticated read) and classify what happened.
 * @param {{serverUrl: string, token: string, pageProtocol?: string, fetch?: typeof fetch, timeoutMs?: number}} options
 * @returns {Promise<Outcome>}
 */
export async function checkConnection({ serverUrl, token, pageProtocol = 'http:', fetch: fetchImpl, timeoutMs = 5000 }) {
    if (!String(serverUrl || '').trim()) return { kind: 'no_url' };
    const url = parseServerUrl(serverUrl);
    if (!url) return { kind: 'bad_url' };
    if (pageProtocol === 'https:' && url.protocol === 'http:' && !isLoopback(url.hostname)) return { kind: 'mixed_content' };
    if (!String(token || '').trim()) return { kind: 'no_token' };
    const problem = tokenProblem(token);
    if (problem) return { kind: 'bad_token', detail: problem };
    const doFetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
    const api = new Api({ serverUrl, token: token.trim(), fetch: doFetch, timeoutMs });
    try {
        await api.ping();
        return { kind: 'connected' };
    } catch (error) {
        if (!(error instanceof LorekeeperError)) return { kind: 'answered', status: 0, detail: String(error) };
        if (error.redirected) return { kind: 'redirected' };
        if (error.status === 401) return { kind: 'unauthorized' };
        if (error.status === 403) return { kind: 'forbidden', detail: error.message };
        if (error.status === 429 || error.status === 503) return { kind: 'busy', status: error.status, retryAfter: error.retryAfter };
        if (error.status) return { kind: 'answered', status: error.status, detail: error.message };
        if (error.timedOut) return { kind: 'timeout' };
    }
    return (await answersAtAll(`${api.serverUrl}/api/v1/chats/?limit=1`, doFetch, timeoutMs)) ? { kind: 'cors' } : { kind: 'nothing_listening' };
}

/**
 * Whether anything answers HTTP at `url`: an opaque `no-cors` GET resolves whatever the answer and whatever CORS
 * says, and fails only when no answer came (refused, unresolvable, reset, timed out).
 * @param {string} url
 * @param {typeof fetch} doFetch
 * @param {number} timeoutMs
 */
async function answersAtAll(url, doFetch, timeoutMs) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
        await doFetch(url, { mode: 'no-cors', credentials: 'omit', cache: 'no-store', signal: controller.signal });
        return true;
    } catch {
        return false; // the request failed: that is the answer this probe looks for
    } finally {
        clearTimeout(timer);
    }
}
