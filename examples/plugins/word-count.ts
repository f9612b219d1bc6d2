// Example host tool: `word_count` counts the words of args.text. A plan calls it
// with a tool_call step; the args are checked against argsSchema before call()
// runs, so call() can trust their shape.
//
//   { "intent": "count the words", "type": "tool_call", "name": "word_count", "args": { "text": "one two three" } }
import type { PluginDefinition } from '../../gateway/plugins/contract.ts';

const plugin: PluginDefinition = {
  name: 'example-word-count',
  version: '1.0.0',
  apiVersion: 1,
  description: 'Example host tool: word_count',
  register(host) {
    host.hostTool({
      name: 'word_count',
      description: 'counts the whitespace-separated words of args.text',
      argsSchema: { type: 'object', required: ['text'], properties: { text: { type: 'string', maxLength: 100000 } }, additionalProperties: false },
      async call(args, ctx) {
        const words = String(args.text).split(/\s+/).filter(Boolean).length;
        return { words, run_id: ctx.runId };
      },
    });
  },
};

export default plugin;
