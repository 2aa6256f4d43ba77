export { API_PREFIX } from '../api-prefix.ts';
