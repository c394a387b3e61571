// Seal every one-shot case of tests/vectors/browser-v1.json with the JS client and print the envelopes
// as JSON (one list, in the file's order): tests/test_browser_client.py opens them with the aggregator's
// own Python code, so a JS envelope that Python cannot open fails there.
import { readFileSync } from 'node:fs';
import { Campaign } from '../src/descriptor.js';
import { seal } from '../src/envelope.js';
import { parseJson } from '../src/json.js';
import { fromHex } from '../src/bytes.js';

const vectors = JSON.parse(readFileSync(new URL('../../tests/vectors/browser-v1.json', import.meta.url), 'utf8'));
const out = [];
for (const v of vectors.one_shot) {
  const campaign = await Campaign.fromJson(parseJson(JSON.stringify(v.config)));
  const payload = parseJson(v.plaintext);
  out.push(await seal(payload, { campaign, secret: fromHex(v.device_secret_hex), reportId: v.report_id }));
}
process.stdout.write(JSON.stringify(out));
