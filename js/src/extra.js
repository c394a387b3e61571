/** The bundle's second file (survey-extra.js): the survey question kinds and their form, the shuffled layers; loaded on demand. */
export * from './questions.js';
export * from './survey-form.js';
export * from './shuffle.js';
