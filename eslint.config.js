// Lint config: the recommended sets of eslint and typescript-eslint, with the few
// rules that catch mistakes we have paid for (floating promises, stray `.only`).
import { readFileSync } from 'node:fs';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Plugins see the plugin contract only (docs/plugins.md): a module under
// plugins/ or examples/plugins/ may import gateway/plugins/contract.ts,
// schemas/, its own files, node built-ins (node:*) and the runtime
// dependencies of package.json; nothing else of this repository.
const runtimeDeps = Object.keys(JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')).dependencies);
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
function pluginImports(extraDirs = []) {
  const own = ['gateway', 'agents', 'cli', 'bench', 'scripts', 'test', 'proto', 'sdk', 'examples', 'config'].filter((d) => !extraDirs.includes(d));
  return ['error', {
    patterns: [
      {
        regex: `^(?!.*/gateway/plugins/contract\\.ts$)(\\./)?(\\.\\./)+(${own.join('|')})(/|$)`,
        message: 'a plugin may import only the plugin contract (gateway/plugins/contract.ts), schemas/, node built-ins and runtime packages',
      },
      {
        regex: `^(?!node:|\\.|(${runtimeDeps.map(escape).join('|')})(/|$))`,
        message: 'a plugin may import node built-ins as node:* and the runtime dependencies of package.json only',
      },
    ],
  }];
}

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'coverage/**', 'build/**', '.build-*/**', '**/*.gen.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly', AbortController: 'readonly', fetch: 'readonly', TextDecoder: 'readonly', TextEncoder: 'readonly', structuredClone: 'readonly', setImmediate: 'readonly', performance: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-restricted-properties': ['error',
        { object: 'describe', property: 'only', message: 'no .only in committed tests' },
        { object: 'it', property: 'only', message: 'no .only in committed tests' },
        { object: 'describe', property: 'skip', message: 'no skipped tests' },
        { object: 'it', property: 'skip', message: 'no skipped tests' }],
    },
  },
  { files: ['plugins/**/*.{ts,js,mjs}', 'examples/plugins/**/*.{ts,js,mjs}'], rules: { 'no-restricted-imports': pluginImports() } },
  // the trace-ingest plugin mounts the capture SDK's reader (another branch builds it)
  { files: ['plugins/trace-ingest/**/*.{ts,js,mjs}'], rules: { 'no-restricted-imports': pluginImports(['sdk']) } },
);
