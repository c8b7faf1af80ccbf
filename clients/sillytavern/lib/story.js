// Words for the panel's "This story" section, from Lorekeeper's pipeline answer (GET chats/<id>/pipeline).

/**
 * What waits for the person's decision: a chat's history is extracted only once they press Run in Lorekeeper
 * (state `awaiting_consent`, with the estimate of what Run spends). Empty when nothing waits.
 * @param {any} pipeline
 */
export function consentNotice(pipeline) {
    if (pipeline?.state !== 'awaiting_consent') return '';
    const estimate = pipeline.estimate;
    if (!estimate) return 'Memories wait for you to press Run in Lorekeeper.';
    const count = (/** @type {number} */ n) => Number(n).toLocaleString('en');
    const messages = `${count(estimate.messages)} message${Number(estimate.messages) === 1 ? '' : 's'}`;
    return `${messages} wait for Run in Lorekeeper before memories are made from them: about ${count(estimate.calls)} model calls and ${count(estimate.prompt_tokens)} prompt tokens.`;
}

/**
 * The extraction line of the panel: how far the tiers have read, the pipeline's state, and failed jobs.
 * @param {any} pipeline
 */
export function pipelineText(pipeline) {
    const states = {
        running: 'running',
        queued: 'queued',
        paused: 'paused',
        gathering: 'waiting for more messages',
        idle: 'up to date',
        off: 'off in your settings',
        no_model: 'no model set up',
        awaiting_consent: 'waiting for you to run it in Lorekeeper',
        limit_reached: 'paused: daily limit reached',
    };
    const state = states[pipeline.state] ?? pipeline.state;
    // Not measures of progress: the rolling summary holds only the older messages by design, and the profiles are
    // rebuilt every so many messages (a chat of 15 read "0 of 15" while its memories were made from 10).
    const covered = (pipeline.coverage ?? [])
        .filter((/** @type {any} */ c) => c.tier !== 'compaction' && c.tier !== 'profiles')
        .map((/** @type {any} */ c) => c.through);
    const through = covered.length ? Math.min(...covered) : null;
    const progress = through !== null && pipeline.message_count ? `${through} of ${pipeline.message_count} messages` : '';
    const failed = pipeline.failed?.length ? ` · ${pipeline.failed.length} failed (retry in Lorekeeper)` : '';
    return [progress, state].filter(Boolean).join(' · ') + failed;
}
