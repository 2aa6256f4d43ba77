/** Where the API channel is mounted (contract §0). */
export const API_PREFIX = '/api/v1/api-channel';
