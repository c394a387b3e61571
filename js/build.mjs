// Bundle the browser client and the survey page's start-up (src/page.js) into one minified ES module,
// aggregator/api/static/survey.js, which the aggregator serves at /survey/static/survey.js. The built file
// is committed (nothing is built at run time); `make js-bundle` rebuilds it, and test/bundle.test.js
// fails when it is stale. `node build.mjs --check` only compares; `--size` prints minified and gzipped sizes.
import { readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

export const OUT = new URL('../aggregator/api/static/survey.js', import.meta.url);

export async function bundle() {
  const result = await esbuild.build({
    entryPoints: [new URL('./src/page.js', import.meta.url).pathname],
    bundle: true, format: 'esm', minify: true, target: 'es2022', legalComments: 'none', write: false,
    banner: { js: '// deniable browser client: built by js/build.mjs from js/src (MIT; @hpke/* MIT, @noble/ed25519 MIT)' },
  });
  return result.outputFiles[0].contents;
}

export function sizes(bytes) {
  return { minified: bytes.length, gzipped: gzipSync(bytes, { level: 9 }).length };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const bytes = await bundle();
  if (process.argv.includes('--check')) {
    const same = Buffer.compare(Buffer.from(bytes), readFileSync(OUT)) === 0;
    console.log(same ? 'the committed bundle is up to date' : 'the committed bundle is stale: run make js-bundle');
    process.exit(same ? 0 : 1);
  }
  writeFileSync(OUT, bytes);
  const { minified, gzipped } = sizes(bytes);
  console.log(`wrote ${OUT.pathname}: ${minified} bytes minified, ${gzipped} bytes gzipped (goal < 40960)`);
}
