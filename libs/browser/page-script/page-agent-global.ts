/** The window property the page agent answers on (defined non-writable and non-enumerable). */
export const PAGE_AGENT_GLOBAL = '__leaseholdPageAgent';
