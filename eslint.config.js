// Lint: ESLint's and typescript-eslint's recommended rules, plus the type-aware promise rules (a
// promise nobody awaits or catches is how events and deliveries get lost). Formatting is Prettier's.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'test-artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // node:test's describe/it return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }] },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  // Migrations build against the schema as it was at each step, which no one type describes (Kysely's
  // own migration idiom); tests read JSON answers as `any` on purpose, to assert on them freely.
  { files: ['src/db/migrations.ts', 'test/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  { files: ['src/dashboard/public/**/*.js'], languageOptions: { globals: globals.browser } },
  { files: ['eslint.config.js'], languageOptions: { globals: globals.node } },
  prettier,
);
