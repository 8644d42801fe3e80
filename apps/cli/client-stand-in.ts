import createClient from 'openapi-fetch';

/**
 * Stand-in for `clients/typescript/index.ts` until the generated client lands: the same opening,
 * `createLeaseholdClient({baseUrl, apiKey})`, over openapi-fetch without the generated paths.
 */
export function createLeaseholdClient(options: { baseUrl: string; apiKey: string }) {
  // biome-ignore lint/suspicious/noExplicitAny: the generated paths replace this.
  return createClient<any>({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.apiKey}` },
  });
}
