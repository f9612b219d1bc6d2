// The bench's two 20-step mechanical plans: `click` (three pages of extraction,
// then twelve clicks on a counter) and `form` (an order form filled four times
// over: fill_field, type_text, select_option, then submit and the URL).
import type { Step } from '../../gateway/plugins/contract.ts';

export type PlanName = 'click' | 'form';

export function plan(site: string, name: PlanName = 'click'): Step[] {
  return name === 'form' ? formPlan(site) : clickPlan(site);
}

function clickPlan(site: string): Step[] {
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

/** The values the form plan leaves in the fields (the plain script types the same). */
export const FORM_FINAL = { email: 'ada4@example.com', name: 'Ada Lovelace 4', size: 'l' };
const SIZES = ['Small', 'Medium', 'Large', 'Large'];

function formPlan(site: string): Step[] {
  const steps: Step[] = [{ intent: 'open the order form', type: 'navigate', url: `${site}/order` } as Step];
  for (let i = 1; i <= 4; i++) {
    steps.push(
      { intent: 'enter the email', type: 'fill_field', params: { label: 'Email', value: `ada${i}@example.com` } } as Step,
      { intent: 'enter the name', type: 'fill_field', params: { label: 'Name', value: `Ada Lovelace ${i}` } } as Step,
      { intent: 'add to the note', type: 'type_text', params: { selector: '#note', text: ` note ${i}` } } as Step,
      { intent: 'pick a size', type: 'select_option', params: { dropdown_label: 'Size', option_label: SIZES[i - 1] } } as Step,
    );
  }
  steps.push(
    { intent: 'send it', type: 'submit', params: { label: 'Send' }, hints: { expect_url_contains: ['/success', `name=Ada+Lovelace+4`] }, required: true } as Step,
    { intent: 'where are we', type: 'extract_url' } as Step,
    { intent: 'read the email back', type: 'extract_data', extract: { schema_name: 'thanks', item_selector: 'body', max_items: 1, fields: [{ name: 'email', type: 'str', selector: '#email', required: true }] } } as Step,
  );
  return steps;
}
