/**
 * The form of a survey (descriptor format 3) on the survey page: one fieldset per question (radio buttons
 * for a choice, checkboxes for a multi question with its limit, a number box with its range), its
 * plain-language note, and the answers read back by question id. Loaded by survey.js only for surveys.
 */
import { el } from './dom.js';

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

