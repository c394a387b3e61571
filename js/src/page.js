/**
 * The bundle's entry (esbuild → aggregator/api/static/survey.js): the package's exports, and the survey
 * page's start-up: every element with `data-deniable-survey` becomes the form of its `data-campaign`.
 */
export * from './index.js';
export { mountSurvey, privacyNote } from './survey.js';
import { mountSurvey } from './survey.js';

if (typeof document !== 'undefined') {
  for (const element of document.querySelectorAll('[data-deniable-survey]')) {
    element.deniable = mountSurvey(element, { campaignId: element.dataset.campaign, aggregatorUrl: element.dataset.aggregator || undefined });
  }
}
