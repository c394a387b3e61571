/**
 * The form of a survey (descriptor format 3) on the survey page: one fieldset per question (radio buttons
 * for a choice, checkboxes for a multi question with its limit, a number box with its range), its
 * plain-language note, and the answers read back by question id. Loaded by survey.js only for surveys.
 */
import { el } from './dom.js';

export function surveyNote(campaign) {
  if (campaign.trustModel === 'central') {
    return [
      'This survey uses the central model: your answers are encrypted in this browser and only the survey’s curator can read them.',
      `The curator promises to publish only noisy totals (ε = ${campaign.epsilon} per release, ${campaign.budget} in all).`,
    ];
  }
  const how = campaign.split.mode === 'sampling'
    ? `This browser answers one of the ${campaign.questions.length} questions, picked at random from a secret kept here (not from your answers); only that answer is sent, randomized at ε = ${campaign.epsilon}.`
    : `Each answer is randomized here with its own share of ε = ${campaign.epsilon} (${campaign.questions.map((q) => `${q.text.slice(0, 40)}: ε = ${Number(q.epsilon.toPrecision(4))}`).join('; ')}).`;
  const groups = campaign.groupFields.length ? ` The ${campaign.groupFields.join(', ')} you give below is sent as it is (not randomized).` : '';
  return [
    `Your answers are randomized in this browser before anything is sent. ${how} Choices are kept or replaced by random ones, selections are reported as weighted coin flips, numbers as a noisy value whose average over many people is right.`,
    'The aggregator receives only those randomized reports, encrypted to the survey’s key, and counts one set of answers per browser. It can estimate totals and averages, but it cannot know what you answered.' +
    ` A question you skip is sent as “skipped” (that much the aggregator learns), never as an answer.${groups}`,
    'Answering again sends the same reports: repeating gives nothing more away.',
  ];
}

export function questionField(q) {
  const legend = el('legend', { text: q.text + (q.optional ? ' (optional)' : '') });
  const fieldset = el('fieldset', { className: `question ${q.kind}`, 'data-question': q.id }, legend);
  if (q.kind === 'choice') {
    q.categories.forEach((label, i) => {
      const id = `q-${q.id}-${i}`;
      fieldset.append(el('div', { className: 'choice' }, el('input', { type: 'radio', name: q.id, id, value: label }), el('label', { for: id, text: label })));
    });
  } else if (q.kind === 'multi') {
    fieldset.append(el('p', { className: 'hint', text: `Select up to ${q.maxSelected}.` }));
    q.options.forEach((label, i) => {
      const id = `q-${q.id}-${i}`;
      fieldset.append(el('div', { className: 'choice' }, el('input', { type: 'checkbox', name: q.id, id, value: label }), el('label', { for: id, text: label })));
    });
  } else {
    const id = `q-${q.id}`;
    fieldset.append(el('div', { className: 'group' },
      el('label', { for: id, text: `A number from ${q.lo} to ${q.hi}` }),
      el('input', { type: 'number', id, name: q.id, min: String(q.lo), max: String(q.hi), step: 'any', inputMode: 'decimal' })));
  }
  return fieldset;
}

/** The answers of a survey form, by question id (a skipped question left out). */
export function readAnswers(form, campaign) {
  const data = new FormData(form);
  const answers = {};
  for (const q of campaign.questions) {
    if (q.kind === 'multi') {
      const picked = data.getAll(q.id).map(String);
      if (picked.length) answers[q.id] = picked;
      else if (!q.optional) answers[q.id] = [];
    } else {
      const value = data.get(q.id);
      if (value === null || value === '') continue;
      answers[q.id] = q.kind === 'number' ? Number(value) : String(value);
    }
  }
  return answers;
}

