#!/usr/bin/env node
// The `runplane` command: loads the TypeScript CLI through tsx.
import { tsImport } from 'tsx/esm/api';

await tsImport('./main.ts', import.meta.url);
