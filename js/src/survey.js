/**
 * A survey form for one campaign, rendered from the validated, pinned descriptor (never from the page's
 * HTML, so what the respondent reads is what the device pinned and will answer), answered with `Client`.
 *
 * `mountSurvey(element, {campaignId, aggregatorUrl, client, issueTokens, round})` renders into `element`
 * (`round`, else `data-round`: the round a recurring campaign's answer belongs to)
 * (`issueTokens(requests)`: the app's call to its backend for admission tokens, made when a campaign with
 * admission is answered by a browser that holds none): the question as the
 * legend of a radio group, one field per group field (a select of the declared values, else a text box),
 * a plain-language note of what is randomized here and what the aggregator learns, and a submit button.
 * Submitting randomizes, seals and stores the answer (one IndexedDB transaction), then delivers it; offline,
 * the report waits in the outbox and is delivered when the browser is back online (`online` event) or on
 * the next visit. Status messages go to an `aria-live` region. The page is ready when
 * `element.dataset.state` is `ready` (`performance.mark('deniable-ready')`).
 *
 * Only `textContent` and DOM properties are written: no HTML from the descriptor is ever parsed, so a
 * hostile label shows as text (and the strict CSP of /survey/<id> forbids inline script anyway).
 */
import { Client } from './client.js';
import { el } from './dom.js';


const percent = (x) => `${(100 * x).toFixed(x > 0.995 || x < 0.005 ? 1 : 0)}%`;

/** p = P(the report says the true answer), for the note (exact r, shown rounded). */
function keepProbability(campaign) {
  const m = campaign.mechanismImpl;
  const r = Number(m.weight.n) / Number(m.weight.d);
  if (campaign.mechanism === 'oue') return 0.5;
  if (campaign.mechanism === 'olh') return r / (r + m.g - 1);
  return r / (r + campaign.k - 1);
}

/** What the page promises, in plain words (also in docs/browser.md). */
export function privacyNote(campaign) {
  if (campaign.isSurvey) return campaign.survey.surveyNote(campaign);
  if (campaign.trustModel === 'central') {
    return [
      'This survey uses the central model: your answer is encrypted in this browser and only the survey’s curator can read it.',
      `The curator promises to publish only noisy totals (ε = ${campaign.epsilon} per release, ${campaign.budget} in all).`,
    ];
  }
  const p = keepProbability(campaign);
  const how = campaign.mechanism === 'oue'
    ? `each of the ${campaign.k} choices is reported as a coin flip weighted so that your own choice shows up with probability 50% and every other with probability ${percent(1 - keepProbability({ ...campaign, mechanism: 'grr', k: 2 }))}`
    : campaign.mechanism === 'olh'
      ? `your choice is hashed into one of ${campaign.mechanismImpl.g} buckets and the bucket is kept with probability ${percent(p)}, otherwise replaced by a random other bucket`
      : `your true choice is kept with probability ${percent(p)}, otherwise replaced by a random other choice`;
  const groups = campaign.groupFields.length
    ? ` The ${campaign.groupFields.join(', ')} you give below is sent as it is (not randomized).`
    : '';
  const shuffled = campaign.shuffler
    ? [`Your randomized report goes first to a shuffler run by another party (${new URL(campaign.shuffler.url).host}), which mixes it with at least ${campaign.shuffler.min_batch - 1} others before the aggregator sees it, without your address or any id: the aggregator cannot tell which report is yours.`]
    : [];
  return [
    `Your answer is randomized in this browser before anything is sent: ${how} (ε = ${campaign.epsilon}).`,
    ...shuffled,
    'The aggregator receives only that randomized report, encrypted to the survey’s key, and counts one report per browser. ' +
    'It can estimate how many people chose each answer, but it cannot know what you chose.' + groups,
    'Answering again sends the same report: repeating gives nothing more away.',
  ];
}

export async function mountSurvey(element, { campaignId, aggregatorUrl, client = null, dbName = 'deniable', issueTokens = null, descriptorText, round } = {}) {
  campaignId ??= element.dataset.campaign;
  round ??= element.dataset.round || null;
  element.dataset.state = 'loading';
  const status = el('p', { className: 'status', role: 'status', 'aria-live': 'polite' });
  element.replaceChildren(status);
  const say = (text, kind = 'info') => {
    status.textContent = text;
    status.dataset.kind = kind;
  };
  let campaign;
  let kinds = null;
  try {
    client ??= await Client.open({ aggregatorUrl, dbName, prefetch: campaignId, descriptorText });
    campaign = await client.campaign(campaignId);
    if (campaign.isSurvey) kinds = await import('./survey-form.js'); // the question kinds' form, surveys only
  } catch (error) {
    say(`This survey cannot be answered here: ${error.message}`, 'error');
    element.dataset.state = 'error';
    return { client, error };
  }
  const form = el('form', { className: 'survey', noValidate: true });
  let fieldset;
  if (campaign.isSurvey) {
    form.append(el('h2', { className: 'title', text: campaign.title }));
    for (const q of campaign.questions) form.append(kinds.questionField(q));
  } else {
    fieldset = el('fieldset', {}, el('legend', { text: campaign.question }));
    campaign.categories.forEach((label, i) => {
      const id = `answer-${i}`;
      fieldset.append(el('div', { className: 'choice' },
        el('input', { type: 'radio', name: 'answer', id, value: label, required: true }),
        el('label', { for: id, text: label })));
    });
    form.append(fieldset);
  }
  for (const name of campaign.groupFields) {
    const id = `group-${name}`;
    const declared = campaign.groupValues[name];
    const input = declared
      ? el('select', { id, name, required: true }, el('option', { value: '', text: 'Choose…' }),
        ...declared.map((v) => el('option', { value: v, text: v })))
      : el('input', { id, name, type: 'text', maxLength: 64, required: true, autocomplete: 'off' });
    form.append(el('div', { className: 'group' }, el('label', { for: id, text: `Your ${name} (sent as it is)` }), input));
  }
  const note = el('section', { className: 'note', 'aria-label': 'What happens to your answer' },
    el('h2', { text: 'What happens to your answer' }),
    ...privacyNote(campaign).map((text) => el('p', { text })));
  const button = el('button', { type: 'submit', text: 'Submit answer' });
  form.append(note, button);
  element.replaceChildren(form, status);

  const deliver = async () => {
    const result = await client.flush();
    if (result.pending === 0 && (result.delivered || result.rejected === 0)) {
      if (result.delivered) say('Thank you: your randomized answer was delivered.', 'done');
      return result;
    }
    if (result.rejected) say('The aggregator refused the report (it will not be sent again).', 'error');
    else say('Saved in this browser: it will be sent when the connection is back.', 'waiting');
    return result;
  };
  let latest = null;
  globalThis.addEventListener?.('online', () => { latest = deliver(); });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const value = campaign.isSurvey ? kinds.readAnswers(form, campaign) : data.get('answer');
    if (value === null) {
      say('Choose an answer first.', 'error');
      fieldset.querySelector('input')?.focus();
      return;
    }
    const groups = Object.fromEntries(campaign.groupFields.map((name) => [name, String(data.get(name) ?? '')]));
    const missing = campaign.groupFields.find((name) => !groups[name]);
    if (missing) {
      say(`Fill in your ${missing} first.`, 'error');
      form.querySelector(`#group-${missing}`)?.focus();
      return;
    }
    button.disabled = true;
    try {
      if (campaign.admission && issueTokens && !(await client.tokens(campaign.id))) await client.obtainTokens(campaign.id, 1, issueTokens);
      const receipt = await client.submit(campaign.id, value, { groups, round: campaign.recurring ? round : null });
      say(receipt.memoized ? 'You had already answered: the same report is sent again.' : 'Randomized and saved; sending…');
      element.dataset.reportId = receipt.reportId;
      latest = deliver();
      await latest;
    } catch (error) {
      say(error.message, 'error');
      if (error.question) form.querySelector(`[data-question="${CSS.escape(error.question)}"] input`)?.focus();
    } finally {
      button.disabled = false;
      element.dataset.state = 'ready';
    }
  });
  element.dataset.state = 'ready';
  globalThis.performance?.mark?.('deniable-ready');
  if ((await client.pending()).length) latest = deliver(); // a report queued on an earlier visit
  return { client, campaign, form, settled: () => latest };
}
