/** Where the API channel is mounted (contract §0): the API serves under it, the web app's examples name it. */
export const API_PREFIX = '/api/v1/api-channel';
