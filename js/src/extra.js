/** The bundle's second file (survey-extra.js): the survey question kinds and their form, the shuffled
 * layers, the rounds of recurring surveys and admission tokens; loaded on demand. */
export * from './questions.js';
export * from './survey-form.js';
export * from './shuffle.js';
export * from './recurring.js';
export * from './tokens.js';
export * from './central.js';
