/**
 * The bundle's entry (esbuild → aggregator/api/static/survey.js): what a page needs of the package
 * (the client, the descriptor, the errors, the form) and the survey page's start-up: every element with
 * `data-deniable-survey` becomes the form of its `data-campaign` (`data-descriptor`: the id of a JSON data
 * block holding the descriptor as the aggregator serves it, which saves the page's one round trip). The central-model samplers and the
 * test-only decrypt are not in it; the survey question kinds are a chunk loaded only for surveys.
 */
export { Client, readBatchReply, retryAfterSeconds } from './client.js';
export { Campaign, FORMAT_VERSION, SUITE_ID } from './descriptor.js';
export { DeviceStore } from './store.js';
export { HmacDrbg } from './drbg.js';
export { canonicalJson, canonicalText, pinnedFingerprint } from './canonical.js';
export { parseJson } from './json.js';
export { devicePublicKey, hpkeInfo, makePseudonym, seal } from './envelope.js';
export { answerTag, drawnQuestion, oneShotAnswer, permanentResponse, roundReportId, surveyOneShot } from './memo.js';
export * from './errors.js';
export { mountSurvey, privacyNote } from './survey.js';
import { mountSurvey } from './survey.js';

if (typeof document !== 'undefined') {
  for (const element of document.querySelectorAll('[data-deniable-survey]')) {
    const descriptorText = element.dataset.descriptor ? document.getElementById(element.dataset.descriptor)?.textContent : undefined;
    element.deniable = mountSurvey(element, { campaignId: element.dataset.campaign, aggregatorUrl: element.dataset.aggregator || undefined, descriptorText });
  }
}
