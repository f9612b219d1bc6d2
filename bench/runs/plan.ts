// The bench's 20-step mechanical plan (three pages of extraction, then twelve clicks).
import type { Step } from '../../gateway/plugins/contract.ts';

export function plan(site: string): Step[] {
  const extract = { intent: 'read the cards', type: 'extract_data', extract: { schema_name: 'flats', item_selector: '.card', max_items: 50, fields: [{ name: 'title', type: 'str', selector: 'h2', required: true }, { name: 'price', type: 'float', selector: '.price' }] } };
  const next = { intent: 'next page', type: 'paginate' };
  const steps: Step[] = [
    { intent: 'open the listings', type: 'navigate', url: `${site}/list?page=1` },
    extract,
    next,
    extract,
    next,
    extract,
    { intent: 'open the counter', type: 'navigate', url: `${site}/counter` },
  ] as Step[];
  for (let i = 0; i < 12; i++) steps.push({ intent: `hit ${i + 1}`, type: 'click', params: { selector: '#hit' } } as Step);
  steps.push({ intent: 'where are we', type: 'extract_url' } as Step);
  return steps;
}
