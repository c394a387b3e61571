// Bundle the browser client and the survey page's start-up (src/page.js) into minified ES modules in
// aggregator/api/static/: survey.js (what every page loads), survey-extra.js (src/extra.js: the survey
// question kinds of descriptor format 3 and their form, the shuffled campaigns' layers and rules, central
// campaigns' rules, the rounds of recurring surveys and admission tokens) and survey-compat.js
// (src/compat.js: pure-JS X25519 and Ed25519 for browsers whose WebCrypto lacks them). The dynamic imports
// of ./questions.js, ./survey-form.js, ./shuffle.js, ./central.js, ./recurring.js and ./tokens.js become
// ./survey-extra.js, that of ./compat.js ./survey-compat.js: each is fetched only when a descriptor (or
// the browser) needs it. The aggregator serves them under /survey/static/. The built files are committed
// (nothing is built at run time); `make js-bundle` rebuilds them, and test/bundle.test.js fails when they
// are stale. `node build.mjs --check` only compares.
import { readFileSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

export const STATIC = new URL('../aggregator/api/static/', import.meta.url);
const BANNER = '// deniable browser client: built by js/build.mjs from js/src (MIT; @hpke/* MIT, @noble/ed25519 MIT)';

/** `{name: bytes}` of the bundle's files, the entry `survey.js` first. */
export async function bundle() {
  const extra = {
    name: 'survey-extra',
    setup(build) {
      build.onResolve({ filter: /\/(questions|survey-form|shuffle|recurring|tokens|central|compat)\.js$/ }, (args) => {
        if (args.kind !== 'dynamic-import') return undefined;
        return { path: args.path.endsWith('/compat.js') ? './survey-compat.js' : './survey-extra.js', external: true };
      });
    },
  };
  const files = {};
  const entries = [['survey.js', './src/page.js', [extra]], ['survey-extra.js', './src/extra.js', [extra]], ['survey-compat.js', './src/compat.js', []]];
  for (const [name, entry, plugins] of entries) {
    const result = await esbuild.build({
      entryPoints: [new URL(entry, import.meta.url).pathname], bundle: true, format: 'esm', minify: true,
      target: 'es2022', legalComments: 'none', write: false, outfile: name, plugins, banner: { js: BANNER },
    });
    files[name] = result.outputFiles[0].contents;
  }
  return files;
}

/** The built files now in the static folder. */
export function committed() {
  const files = {};
  for (const name of readdirSync(STATIC)) if (/^survey(-chunk-[A-Z0-9]+|-extra|-compat)?\.js$/.test(name)) files[name] = readFileSync(new URL(name, STATIC));
  return files;
}

export const gz = (bytes) => gzipSync(bytes, { level: 9 }).length;

if (import.meta.url === `file://${process.argv[1]}`) {
  const files = await bundle();
  if (process.argv.includes('--check')) {
    const old = committed();
    const same = Object.keys(files).sort().join() === Object.keys(old).sort().join()
      && Object.entries(files).every(([name, bytes]) => Buffer.compare(Buffer.from(bytes), old[name]) === 0);
    console.log(same ? 'the committed bundle is up to date' : 'the committed bundle is stale: run make js-bundle');
    process.exit(same ? 0 : 1);
  }
  for (const name of Object.keys(committed())) if (!(name in files)) unlinkSync(new URL(name, STATIC));
  for (const [name, bytes] of Object.entries(files)) {
    writeFileSync(new URL(name, STATIC), bytes);
    console.log(`wrote ${name}: ${bytes.length} bytes minified, ${gz(bytes)} bytes gzipped`);
  }
}
