// Preload for the MCP conformance CLI (`node --import ./conformance_shim.mjs ...`): the CLI
// imports `globSync` from "fs", which Node added in 22; on an older Node its module fails to link.
// A preloaded CommonJS assignment to fs.globSync comes too late (Node fixes the named exports of
// "fs" for ES modules at startup), so this file registers itself as a module-resolution hook that
// serves every ES import of "fs" / "node:fs" from a module re-exporting node:fs plus the pinned
// `glob` package's globSync. On a Node that has fs.globSync it does nothing.
import fs from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const SHIMMED_FS = 'cancelkit-shim:fs';

let globUrl;

// Module hooks run on a thread of their own, which loads this file again: register only once,
// from the main thread, and hand the hooks where `glob` lives (resolved next to this file).
if (isMainThread && typeof fs.globSync !== 'function') {
  register(import.meta.url, { data: { globUrl: import.meta.resolve('glob') } });
}

export async function initialize(data) {
  globUrl = data.globUrl;
}

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== SHIMMED_FS) {
    return { url: SHIMMED_FS, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url === SHIMMED_FS) {
    const source = [
      `import fs from 'node:fs';`,
      `import { globSync } from ${JSON.stringify(globUrl)};`,
      `export * from 'node:fs';`,
      `export { globSync };`,
      `export default fs;`,
    ].join('\n');
    return { format: 'module', source, shortCircuit: true };
  }
  return next(url, context);
}
