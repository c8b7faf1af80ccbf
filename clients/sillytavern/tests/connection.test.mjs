// Test connection (lib/connection.js): each failure a browser can tell apart gets its own message.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Api, LorekeeperError, retryAfterSeconds } from '../lib/api.js';
import { LINK_RETRY_MAX_MS, LINK_RETRY_MIN_MS, checkConnection, cleartextWarning, describeConnection, isLoopback, linkRetry, serverUrlProblem, tokenProblem } from '../lib/connection.js';

const ORIGIN = 'http://127.0.0.1:8000';

/**
 * A fetch that fails as a browser's does: a TypeError with no detail for a refused connection and for a CORS
 * refusal alike, an AbortError when the signal fires. `no-cors` requests get an opaque answer from any listener.
 * @param {{listening?: boolean, corsAllowed?: boolean, status?: number, body?: any, hang?: boolean, retryAfter?: string}} server
 */
function browserFetch({ listening = true, corsAllowed = true, status = 200, body = { results: [] }, hang = false, retryAfter = '' }) {
    const calls = [];
    const fetch = async (url, init = {}) => {
        calls.push({ url, mode: init.mode ?? 'cors', authorization: init.headers?.Authorization ?? null });
        if (!listening) throw new TypeError('Failed to fetch');
        if (hang) {
            await new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
        }
        if (init.mode === 'no-cors') return new Response(null, { status: 200 });
        if (!corsAllowed) throw new TypeError('Failed to fetch');
        const headers = { 'Content-Type': 'application/json', ...(retryAfter ? { 'Retry-After': retryAfter } : {}) };
        return new Response(JSON.stringify(body), { status, headers });
    };
    return { fetch, calls };
}

async function check(server, { serverUrl = 'http://127.0.0.1:8720', token = 'lk_good', pageProtocol = 'http:' } = {}) {
    const { fetch, calls } = browserFetch(server);
    const outcome = await checkConnection({ serverUrl, token, pageProtocol, fetch, timeoutMs: 50 });
    return { outcome, calls, shown: describeConnection(outcome, { serverUrl, origin: ORIGIN, timeoutMs: 50 }) };
}

describe('checkConnection', () => {
    test('a server that answers the authenticated read is connected, and no probe is sent', async () => {
        const { outcome, calls, shown } = await check({});
        assert.equal(outcome.kind, 'connected');
        assert.equal(calls.length, 1);
        assert.equal(calls[0].url, 'http://127.0.0.1:8720/api/v1/chats/?limit=1');
        assert.equal(calls[0].authorization, 'Bearer lk_good');
        assert.equal(shown.state, 'synced');
        assert.match(shown.message, /^Connected to Lorekeeper at http:\/\/127\.0\.0\.1:8720\.$/);
    });

    test('nothing listening: the request and the probe both fail', async () => {
        const { outcome, calls, shown } = await check({ listening: false });
        assert.equal(outcome.kind, 'nothing_listening');
        assert.deepEqual(calls.map((c) => c.mode), ['cors', 'no-cors']);
        assert.match(shown.message, /Nothing is listening at http:\/\/127\.0\.0\.1:8720/);
        assert.doesNotMatch(shown.message, /CORS/, 'a refused connection does not send the person to CORS');
    });

    test('a CORS refusal names the server setting and the exact origin to add', async () => {
        const { outcome, calls, shown } = await check({ corsAllowed: false });
        assert.equal(outcome.kind, 'cors');
        assert.equal(calls[1].authorization, null, 'the probe carries no token');
        assert.match(shown.message, /CORS/);
        assert.ok(shown.message.includes(`Add ${ORIGIN} to LOREKEEPER_CORS_ORIGINS`), shown.message);
        // A proxy's redirect from http:// to https:// looks the same to a page: the message names it too.
        assert.match(shown.message, /Or the address redirects \(a proxy sending http:\/\/ to https:\/\/\)/);
        const secure = await check({ corsAllowed: false }, { serverUrl: 'https://lore.example' });
        assert.equal(secure.outcome.kind, 'cors');
        assert.doesNotMatch(secure.shown.message, /redirects/);
    });

    test('401 is about the token', async () => {
        const { outcome, shown } = await check({ status: 401, body: { detail: 'Invalid token.' } });
        assert.equal(outcome.kind, 'unauthorized');
        assert.match(shown.message, /refused the token \(401\)/);
        assert.match(shown.message, /under API tokens/);
    });

    test('another answer gives its status and asks whether this is Lorekeeper', async () => {
        const { outcome, shown } = await check({ status: 404, body: 'Not Found' });
        assert.deepEqual(outcome, { kind: 'answered', status: 404, detail: 'Lorekeeper answered 404.' });
        assert.match(shown.message, /answered 404/);
        assert.match(shown.message, /Is this the address of Lorekeeper\?/);
    });

    test('no answer within the time-out says so', async () => {
        const { outcome, shown } = await check({ hang: true });
        assert.equal(outcome.kind, 'timeout');
        assert.match(shown.message, /did not answer within 0\.1 s/);
    });

    test('no URL, a URL that is not http(s), and no token are said before any request', async () => {
        for (const [serverUrl, token, kind] of [
            ['', 'lk_good', 'no_url'],
            ['127.0.0.1:8720', 'lk_good', 'bad_url'],
            ['ftp://example.org', 'lk_good', 'bad_url'],
            ['http://127.0.0.1:8720', '  ', 'no_token'],
        ]) {
            const { outcome, calls } = await check({}, { serverUrl, token });
            assert.equal(outcome.kind, kind, `${serverUrl} / ${token}`);
            assert.equal(calls.length, 0);
        }
    });

    test('a token with a character no token has is said before any request, not taken for CORS', async () => {
        for (const [token, said] of [
            ['lk_abc\u200bdef', /U\+200B at character 7 of 10/],
            ['\u201clk_abcdef\u201d', /U\+201C "\u201c" at character 1 of 11/],
            ['lk_abc def', /U\+0020 at character 7 of 10/],
            ['lk_caf\u00e9', /U\+00E9 "\u00e9" at character 7 of 7/],
        ]) {
            const { outcome, calls, shown } = await check({}, { token });
            assert.equal(outcome.kind, 'bad_token', token);
            assert.equal(calls.length, 0, 'nothing was sent');
            assert.equal(shown.state, 'error');
            assert.match(shown.message, /^The API token: the token holds a character no token has, /);
            assert.match(shown.message, said);
            assert.match(shown.message, /copy it again from Lorekeeper's API tokens page/);
        }
        // Spaces and line ends around it are trimmed, as the request trims them; a real token passes.
        for (const token of ['  lk_Ab-9_x\n', 'lk_' + 'A'.repeat(43)]) assert.equal(tokenProblem(token), '', JSON.stringify(token));
        assert.equal(tokenProblem(''), '');
    });

    test('from an https:// page, plain http:// to another machine is blocked by the browser, and said so', async () => {
        const { outcome, calls, shown } = await check({}, { serverUrl: 'http://lk.example:8720', pageProtocol: 'https:' });
        assert.equal(outcome.kind, 'mixed_content');
        assert.equal(calls.length, 0);
        assert.match(shown.message, /https:\/\//);
    });
});

describe('the token in clear', () => {
    test('plain http:// to another host warns, also when connected', async () => {
        const { shown } = await check({}, { serverUrl: 'http://192.168.1.20:8720/' });
        assert.equal(shown.state, 'synced');
        assert.match(shown.message, /Connected to Lorekeeper at http:\/\/192\.168\.1\.20:8720\. Warning: .*unencrypted to 192\.168\.1\.20:8720/);
    });

    test('loopback addresses and https:// do not warn', () => {
        for (const url of ['http://127.0.0.1:8720', 'http://localhost:8720', 'http://[::1]:8720', 'http://127.1.2.3', 'https://lk.example']) {
            assert.equal(cleartextWarning(url), '', url);
        }
        assert.notEqual(cleartextWarning('http://lk.example'), '');
        assert.notEqual(cleartextWarning('http://127.0.0.1.nip.io'), '');
    });

    test('isLoopback knows this machine by its names only', () => {
        assert.ok(isLoopback('localhost') && isLoopback('app.localhost') && isLoopback('[::1]') && isLoopback('127.0.0.1'));
        assert.ok(!isLoopback('10.0.0.1') && !isLoopback('example.org') && !isLoopback('127.0.0.1.example.org'));
    });
});

describe('linking again while Lorekeeper does not answer', () => {
    test('waits longer each time, up to a cap, and starts over when given the first wait again', () => {
        const none = () => 0;
        const waits = [];
        let next = LINK_RETRY_MIN_MS;
        for (let n = 0; n < 8; n++) {
            const { waitMs, nextMs } = linkRetry(next, 0, none);
            waits.push(waitMs);
            next = nextMs;
        }
        assert.deepEqual(waits, [5000, 10000, 20000, 40000, 60000, 60000, 60000, 60000]);
        assert.equal(LINK_RETRY_MAX_MS, 60000);
        assert.equal(linkRetry(LINK_RETRY_MIN_MS, 0, none).waitMs, 5000);
    });

    test("follows the server's Retry-After, within ten minutes", () => {
        assert.equal(linkRetry(5000, 30, () => 0).waitMs, 30000);
        assert.equal(linkRetry(40000, 30, () => 0).waitMs, 40000); // its own wait is longer
        assert.equal(linkRetry(5000, 86400, () => 0).waitMs, 600000);
        assert.equal(linkRetry(5000, Number.NaN, () => 0).waitMs, 5000);
        assert.equal(linkRetry(5000, -5, () => 0).waitMs, 5000);
    });

    test('spreads the browsers a restart left waiting over a fifth of the wait', () => {
        assert.equal(linkRetry(10000, 0, () => 0.999).waitMs, 11998);
        assert.equal(linkRetry(5000, 30, () => 0.5).waitMs, 33000); // a Retry-After is spread too
        const spread = new Set(Array.from({ length: 50 }, () => linkRetry(10000).waitMs));
        assert.ok(spread.size > 10 && [...spread].every((ms) => ms >= 10000 && ms <= 12000));
    });
});

describe('an address that redirects', () => {
    /** A real HTTP server that sends every request on to /moved/…, as a proxy sending http:// to https:// does. */
    async function redirecting() {
        const { createServer } = await import('node:http');
        const seen = [];
        const server = createServer((request, response) => {
            seen.push(`${request.method} ${request.url}`);
            response.writeHead(request.url.startsWith('/moved') ? 200 : 301, { Location: `/moved${request.url}`, 'Content-Type': 'application/json' });
            response.end('{"results": []}');
        });
        await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
        const base = `http://127.0.0.1:${server.address().port}`;
        return { base, seen, close: () => new Promise((resolve) => server.close(resolve)) };
    }

    test('is not followed: the write is not sent again as a read, and the error says why', async () => {
        const server = await redirecting();
        try {
            const api = new Api({ serverUrl: server.base, token: 'lk_good' });
            await assert.rejects(api.request('POST', 'chats/7/messages', { body: { messages: [] } }), (error) => {
                assert.ok(error instanceof LorekeeperError && error.redirected && !error.offline);
                assert.equal(error.status, 301);
                assert.match(error.message, /answered with a redirect to \/moved\/api\/v1\/chats\/7\/messages/);
                return true;
            });
            assert.deepEqual(server.seen, ['POST /api/v1/chats/7/messages']);
        } finally {
            await server.close();
        }
    });

    test('is named by Test connection', async () => {
        const server = await redirecting();
        try {
            const outcome = await checkConnection({ serverUrl: server.base, token: 'lk_good', timeoutMs: 2000 });
            assert.deepEqual(outcome, { kind: 'redirected' });
            const { message, state } = describeConnection(outcome, { serverUrl: server.base, origin: ORIGIN });
            assert.equal(state, 'error');
            assert.match(message, /answers with a redirect, which the extension does not follow/);
            assert.equal(server.seen.length, 1);
        } finally {
            await server.close();
        }
    });
});

describe('a busy server', () => {
    test('503 or 429 is said to be busy, with the wait it asked for, not a wrong address', async () => {
        const busy = { message: 'The server is busy: the request was not started. Try again in a few seconds.' };
        const { outcome, shown } = await check({ status: 503, body: busy, retryAfter: '5' });
        assert.deepEqual(outcome, { kind: 'busy', status: 503, retryAfter: 5 });
        assert.equal(shown.message, 'Lorekeeper at http://127.0.0.1:8720 is busy (503): try again in 5 s.');
        const limited = await check({ status: 429, body: { detail: 'Request was throttled.' } });
        assert.equal(limited.shown.message, 'Lorekeeper at http://127.0.0.1:8720 is busy (429): try again in a few seconds.');
        assert.doesNotMatch(limited.shown.message, /address/);
    });

    test('a Retry-After given as an HTTP date, as a proxy may give it, is read as the seconds until then', async () => {
        const inTwoMinutes = new Date(Date.now() + 120_000).toUTCString();
        const { outcome } = await check({ status: 503, body: { message: 'Down for maintenance.' }, retryAfter: inTwoMinutes });
        assert.equal(outcome.kind, 'busy');
        assert.ok(outcome.retryAfter >= 118 && outcome.retryAfter <= 121, String(outcome.retryAfter));
        const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
        assert.equal(retryAfterSeconds('Wed, 21 Oct 2026 07:28:30 GMT', now), 30);
        assert.equal(retryAfterSeconds('Wed, 21 Oct 2026 07:27:00 GMT', now), 0); // past
        assert.equal(retryAfterSeconds('soon', now), 0);
        assert.equal(retryAfterSeconds(null, now), 0);
        assert.equal(retryAfterSeconds(' 7 ', now), 7);
        assert.equal(retryAfterSeconds('Thu, 22 Oct 2026 07:28:00 GMT', now), 600); // a day ahead: ten minutes at most
        assert.equal(retryAfterSeconds('86400', now), 600);
    });
});

describe('the server URL as typed', () => {
    test('an address without its scheme is said to need http:// or https://', () => {
        for (const typed of ['127.0.0.1:8720', 'localhost:8720', 'lk.example.com', ' lk.example.com/ ']) {
            const problem = serverUrlProblem(typed);
            assert.match(problem, /needs http:\/\/ or https:\/\/ before it: http:\/\/\S+ \(or https:\/\/\S+\)\.$/, typed);
            assert.ok(problem.includes(`http://${typed.trim()}`), problem);
        }
    });

    test('an http(s) address or none is no problem; another scheme or nonsense is named', () => {
        for (const typed of ['', '  ', 'http://127.0.0.1:8720', 'https://lk.example.com/']) assert.equal(serverUrlProblem(typed), '', typed);
        assert.equal(serverUrlProblem('ftp://lk.example.com'), '"ftp://lk.example.com" is not an http:// or https:// address.');
        assert.equal(serverUrlProblem('http://'), '"http://" is not an http:// or https:// address.');
    });

    test('an address holding a login is named, the address without it given, and never tried', async () => {
        for (const typed of ['http://mira:s3cret@127.0.0.1:8720', 'https://mira@lk.example.com/', 'mira:s3cret@127.0.0.1:8720']) {
            const problem = serverUrlProblem(typed);
            assert.match(problem, /^the address holds a login/, typed);
            assert.ok(!problem.includes('s3cret'), problem); // the password is not shown back
        }
        assert.ok(serverUrlProblem('http://mira:s3cret@127.0.0.1:8720').includes('give http://127.0.0.1:8720.'));
        assert.ok(serverUrlProblem('https://mira@lk.example.com/').includes('give https://lk.example.com.'));
        // A password that breaks the address (a / in it) is not shown back either.
        assert.equal(serverUrlProblem('http://mira:s3/cret@127.0.0.1:8720'), '"http://…@127.0.0.1:8720" is not an http:// or https:// address.');
        const { outcome, calls, shown } = await check({}, { serverUrl: 'http://mira:s3cret@127.0.0.1:8720' });
        assert.equal(outcome.kind, 'bad_url');
        assert.equal(calls.length, 0);
        assert.match(shown.message, /^The server URL: the address holds a login/);
        assert.equal(cleartextWarning('http://mira:s3cret@lk.example.com'), '');
    });

    test('Test connection says the same of an address without its scheme, without trying it', async () => {
        const { outcome, calls, shown } = await check({}, { serverUrl: '127.0.0.1:8720' });
        assert.equal(outcome.kind, 'bad_url');
        assert.equal(calls.length, 0);
        assert.equal(shown.message, 'The server URL: the address needs http:// or https:// before it: http://127.0.0.1:8720 (or https://127.0.0.1:8720).');
    });
});
