// Embedding deniable's browser client in your own page, with your own markup (no mountSurvey).
//
// The module is the aggregator's bundle, served under your origin by a reverse proxy (serve.py here,
// nginx in production: docs/browser.md). An app that bundles its own code can instead
// `import { Client, privacyNote } from '@deniable/client'` (js/ in this repository) and let esbuild do it.
import { Client, privacyNote } from '/survey/static/survey.js';

const CAMPAIGN = new URLSearchParams(location.search).get('campaign') ?? 'product-rating';
const form = document.getElementById('rate');
const status = document.getElementById('status');

const client = await Client.open({ dbName: 'my-app-deniable' }); // the aggregator is this page's origin
let campaign;
try {
  campaign = await client.campaign(CAMPAIGN); // fetched, validated and pinned, as the Python client does
} catch (error) {
  status.textContent = `The survey is not available: ${error.message}`;
  throw error;
}
document.getElementById('question').textContent = campaign.question; // text, never HTML
for (const label of campaign.categories) {
  const input = Object.assign(document.createElement('input'), { type: 'radio', name: 'answer', value: label });
  const row = document.createElement('label');
  row.append(input, ` ${label}`);
  document.getElementById('choices').append(row);
}
for (const text of privacyNote(campaign)) document.getElementById('note').append(Object.assign(document.createElement('p'), { textContent: text }));
form.hidden = false;
status.textContent = '';
document.body.dataset.state = 'ready';

const deliver = async () => {
  const result = await client.flush(); // a report leaves the outbox only on the aggregator's verdict
  status.textContent = result.pending ? 'Saved on this device; it will be sent when you are online.' : 'Thank you!';
  document.body.dataset.state = result.pending ? 'waiting' : 'sent';
};
addEventListener('online', deliver);
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const value = new FormData(form).get('answer');
  if (value === null) {
    status.textContent = 'Pick an answer first.';
    return;
  }
  try {
    await client.submit(campaign.id, value); // randomized, sealed and stored here, in one transaction
    await deliver();
  } catch (error) {
    status.textContent = error.message; // every error has a `code` as in deniable.shared.errors
  }
});
