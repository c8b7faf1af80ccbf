// The extension's panel in SillyTavern's Extensions drawer (settings.html): the server and token a person types,
// Test connection, the open chat's status line and its "This story" section.

import { checkConnection, cleartextWarning, describeConnection, serverUrlProblem, tokenProblem } from './lib/connection.js';
import { consentNotice, pipelineText } from './lib/story.js';

const TEST_TIMEOUT_MS = 8000;

/**
 * The panel, wired to the extension: it reads and writes the stored settings object, and links the open chat again
 * when the server, the token or what is synced changes.
 * @param {{
 *   ctx: () => any,
 *   settings: () => any,
 *   api: () => import('./lib/api.js').Api,
 *   linked: () => {chatId: number|null}|null,
 *   relink: () => Promise<void>,
 *   clearSlots: () => void,
 *   folder: string,
 *   defaultTimeoutMs: number,
 * }} host
 */
export function settingsPanel({ ctx, settings, api, linked, relink, clearSlots, folder, defaultTimeoutMs }) {
    /** @param {{state: string, message: string, pending?: number}} status */
    function showStatus(status) {
        const element = document.getElementById('lorekeeper_status');
        if (!element) return;
        // Only what changed: the status line is a live region, and a screen reader reads it again at each write
        // (the sync says "Synced" after every look at the chat, every few seconds).
        if (element.textContent !== status.message) element.textContent = status.message;
        if (element.dataset.state !== status.state) element.dataset.state = status.state;
    }

    async function refreshStory() {
        const element = document.getElementById('lorekeeper_story');
        if (!element) return;
        const chatId = linked()?.chatId;
        if (!chatId) {
            element.innerHTML = '<span class="lorekeeper-muted">No chat linked.</span>';
            return;
        }
        try {
            const [chat, memories, pipeline] = await Promise.all([
                api().getChat(chatId),
                api().memoryCount(chatId),
                api().pipeline(chatId).catch(() => null),
            ]);
            const url = new URL(`chats/${chatId}/`, `${api().serverUrl}/`);
            const progress = pipeline ? pipelineText(pipeline) : '';
            const lines = [
                `Memories: ${Number(memories)}`,
                `Indexed for recall: ${Number(chat.indexed_messages)} of ${Number(chat.total_messages)} messages${chat.pending ? ` (${Number(chat.pending)} pending)` : ''}`,
                progress ? `Extraction: ${progress}` : '',
            ].filter(Boolean);
            element.replaceChildren(
                ...lines.map((text) => Object.assign(document.createElement('div'), { textContent: text })),
            );
            const waiting = consentNotice(pipeline);
            if (waiting) element.append(Object.assign(document.createElement('div'), { className: 'lorekeeper-waiting', textContent: waiting }));
            if (url.protocol === 'http:' || url.protocol === 'https:') {
                const text = waiting ? 'Review and run it in Lorekeeper' : 'Open in Lorekeeper';
                element.append(Object.assign(document.createElement('a'), { href: url.href, target: '_blank', rel: 'noopener', textContent: text }));
            }
        } catch (error) {
            element.textContent = `Story panel unavailable: ${error instanceof Error ? error.message : error}`;
        }
    }

    /** The line under Test connection: the test's outcome, or the clear-text warning for the URL as typed. */
    function showConnection(/** @type {string} */ state, /** @type {string} */ message) {
        const element = document.getElementById('lorekeeper_connection');
        if (!element) return;
        element.textContent = message;
        element.dataset.state = state;
        element.hidden = !message;
    }

    /** What is wrong with the address or the token as typed, else a warning when the token would travel in clear. */
    function showFieldsProblem() {
        const problem = serverUrlProblem(settings().server_url);
        const token = tokenProblem(settings().api_token);
        if (problem) showConnection('error', `The server URL: ${problem}`);
        else if (token) showConnection('error', `The API token: ${token}`);
        else showConnection('offline', cleartextWarning(settings().server_url));
    }

    let testing = 0; // the latest test's number: an earlier one's outcome is not shown
    let running = false;

    async function testConnection() {
        savePanel(); // what the fields show is what is tested, whether or not the cursor left them
        const s = settings();
        const run = ++testing;
        running = true;
        showConnection('binding', `Testing ${s.server_url}…`);
        const outcome = await checkConnection({
            serverUrl: s.server_url,
            token: s.api_token,
            pageProtocol: location.protocol,
            timeoutMs: TEST_TIMEOUT_MS,
        });
        if (run !== testing) return; // pressed again meanwhile, or the address or the token changed
        running = false;
        const shown = describeConnection(outcome, { serverUrl: s.server_url, origin: location.origin, timeoutMs: TEST_TIMEOUT_MS });
        showConnection(shown.state, shown.message);
        if (outcome.kind === 'connected') await relink();
    }

    /** The address or the token changed while a test ran: its outcome, about what they held before, is not shown
     * over what the panel says of them now. */
    function testOutdated() {
        if (!running) return;
        running = false;
        testing++;
        showFieldsProblem();
    }

    const field = (/** @type {string} */ id) => /** @type {HTMLInputElement|null} */ (document.getElementById(id));

    /** Copy the panel's fields into the stored settings and have SillyTavern save them. */
    function savePanel() {
        const s = settings();
        const url = field('lorekeeper_server_url');
        if (!url) return; // no panel
        s.server_url = url.value.trim();
        s.api_token = field('lorekeeper_api_token')?.value.trim() ?? s.api_token;
        s.sync = field('lorekeeper_sync')?.checked ?? s.sync;
        s.sync_assistant = field('lorekeeper_sync_assistant')?.checked ?? s.sync_assistant;
        s.inject = field('lorekeeper_inject')?.checked ?? s.inject;
        s.timeout_ms = Math.min(60000, Math.max(200, Number(field('lorekeeper_timeout_ms')?.value) || defaultTimeoutMs));
        ctx().saveSettingsDebounced();
    }

    async function add() {
        const html = await (await fetch(`${folder}settings.html`)).text();
        const container = document.getElementById('extensions_settings2') ?? document.getElementById('extensions_settings');
        container?.insertAdjacentHTML('beforeend', html);
        const s = settings();
        const input = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (field(id));
        input('lorekeeper_server_url').value = s.server_url;
        input('lorekeeper_api_token').value = s.api_token;
        input('lorekeeper_sync').checked = s.sync;
        input('lorekeeper_sync_assistant').checked = s.sync_assistant;
        input('lorekeeper_inject').checked = s.inject;
        input('lorekeeper_timeout_ms').value = String(s.timeout_ms);
        showFieldsProblem();
        // Saved as typed (SillyTavern saves a second after the last change): a token pasted and the page reloaded
        // without leaving the field is kept. The field then shows the time-out used, once left.
        for (const id of ['lorekeeper_server_url', 'lorekeeper_api_token', 'lorekeeper_timeout_ms']) {
            input(id).addEventListener('input', savePanel);
        }
        for (const id of ['lorekeeper_server_url', 'lorekeeper_api_token']) {
            input(id).addEventListener('input', testOutdated);
        }
        input('lorekeeper_timeout_ms').addEventListener('change', () => {
            savePanel();
            input('lorekeeper_timeout_ms').value = String(settings().timeout_ms);
        });
        // Another server or token: the open chat is linked again through it (its status line follows).
        for (const id of ['lorekeeper_server_url', 'lorekeeper_api_token', 'lorekeeper_sync', 'lorekeeper_sync_assistant']) {
            input(id).addEventListener('change', () => {
                savePanel();
                relink();
            });
        }
        for (const id of ['lorekeeper_server_url', 'lorekeeper_api_token']) {
            input(id).addEventListener('change', showFieldsProblem); // after the save above
        }
        input('lorekeeper_inject').addEventListener('change', () => {
            savePanel();
            if (!settings().inject) clearSlots();
        });
        const test = document.getElementById('lorekeeper_test');
        test?.addEventListener('click', testConnection);
        test?.addEventListener('keydown', (event) => {
            if (event.key !== 'Enter' && event.key !== ' ') return;
            event.preventDefault();
            testConnection();
        });
        document.getElementById('lorekeeper_story_refresh')?.addEventListener('click', refreshStory);
        // Fresh figures whenever the panel is opened.
        document.querySelector('.lorekeeper-settings .inline-drawer-toggle')?.addEventListener('click', () => setTimeout(refreshStory, 0));
    }

    return { add, showStatus, refreshStory };
}
